"""Is the engine kept fed? Completion tokens/s of the sampling stage under
the `queue` schedule (the default) and under `waves`, against one raw vLLM
`generate` call on exactly the requests the stage made (same prompts, same
seeds). Issue 41's `engine_ratio` is queue / raw.

The tasks are the bundled sample's, through `tasksieve dedup` (what a run
would sample), copied `--copies` times under new content hashes (so new
seeds: new attempts) to make a pool larger than one window of
`tasks_per_batch` open tasks, as a real curation run is. Everything else is
the shipped default (sequential, k=8, tasks_per_batch 128, the CPU engine
settings) except `--max-tokens`, which bounds the bench's time.

One process, one engine, loaded once (and warmed up on a few tasks); the
measurements run in turn, `--repeat` times in alternating order. Stage
tokens/s = completion tokens of its attempts / the stage's wall time
(verification included); raw = the same tokens / `LLM.generate`'s wall
time. The stage also runs the rubric judge's requests on the same engine
(the sampler judges by default): a second raw call adds them after the
attempts', and `ratios_with_judge` compares the stage's attempt and
judge completion tokens/s with it. `--schedules` picks the stage's rows:
`queue`, `waves`, and `queue-beside` (the queue verifying in threads
beside the engine, what it does where the engine is not on the CPU).

    .venv/bin/python bench/engine_feed.py [--copies 2] [--max-tokens 96] [--repeat 1]
        [--schedules queue,waves] [--json out.json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def pool(copies: int) -> list[dict]:
    """The bundled sample's tasks a run would sample, `copies` times."""
    import pyarrow.parquet as pq

    cli = str(Path(sys.executable).parent / "tasksieve")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([cli, "sample-data", f"{tmp}/sample"], check=True, capture_output=True)
        subprocess.run(
            [cli, "dedup", "-i", f"{tmp}/sample/deliveries", "--out", f"{tmp}/dedup", "-q"],
            check=True,
            capture_output=True,
        )
        rows = [r for r in pq.read_table(f"{tmp}/dedup/results.parquet").to_pylist() if r["status"] == "kept"]
    tasks = []
    for c in range(copies):
        for r in rows:
            h = r["content_hash"] if c == 0 else hashlib.sha256(f"{r['content_hash']}/{c}".encode()).hexdigest()
            tasks.append(dict(r, content_hash=h, task_id=f"{r['task_id']}/{c}"))
    return sorted(tasks, key=lambda t: t["content_hash"])


def stage(tasks, backend, plan, schedule: str) -> dict:
    from tasksieve.transforms.sample import verify_behind
    from tasksieve.transforms.sample.queued import sample_queued
    from tasksieve.transforms.sample.stage import SamplingStats, sample_tasks
    from tasksieve.transforms.verify import verifiers

    stats = SamplingStats()
    judge_requests = []  # the rubric judge's requests (the sampler judges): engine work too

    def recorded(*args, **kw):
        asked = make_requests(*args, **kw)
        judge_requests.extend(req for req, _ in asked)
        return asked

    make_requests = verifiers.rubric_requests
    verifiers.rubric_requests = verify_behind.rubric_requests = recorded
    t0 = time.perf_counter()
    try:
        if schedule.startswith("queue"):
            shares_cpu = backend.shares_cpu
            backend.shares_cpu = shares_cpu and schedule != "queue-beside"
            try:
                pairs = list(sample_queued(tasks, backend, plan, stats=stats))
            finally:
                backend.shares_cpu = shares_cpu
        else:
            n = plan.sampling.tasks_per_batch
            pairs = [
                p for i in range(0, len(tasks), n) for p in sample_tasks(tasks[i : i + n], backend, plan, stats=stats)
            ]
    finally:
        verifiers.rubric_requests = verify_behind.rubric_requests = make_requests
    wall = time.perf_counter() - t0
    attempts = {(a["content_hash"], a["attempt_idx"]): a for tag, a in pairs if tag == "attempt"}
    tokens = sum(a["completion_tokens"] for a in attempts.values())
    judged = sum(a.get("judge_completion_tokens") or 0 for a in attempts.values())
    return {
        "attempts": attempts,
        "judge_requests": judge_requests,
        "tokens": tokens,
        "wall": wall,
        "tok_s": tokens / wall,
        "all_tok_s": (tokens + judged) / wall,
        "engine": stats.engine_seconds,
    }


def raw(attempts: dict, tasks_by_hash: dict, backend, plan, judge_requests=()) -> dict:
    """One `LLM.generate` call on the stage's requests: the engine at its
    best. With `judge_requests`, the rubric judge's requests too (the engine
    work the stage must do), after the attempts'."""
    from vllm import SamplingParams

    from tasksieve.transforms.sample.stage import messages_for

    keys = sorted(attempts)
    s = plan.sampling
    prompts = [backend._prompt(messages_for(tasks_by_hash[h], plan)) for h, _ in keys]
    seeds = [attempts[k]["seed"] for k in keys]
    prompts += [backend._prompt(r.messages) for r in judge_requests]
    seeds += [r.seed for r in judge_requests]
    params = [SamplingParams(temperature=s.temperature, top_p=s.top_p, max_tokens=s.max_tokens, seed=x) for x in seeds]
    t0 = time.perf_counter()
    outs = backend.llm.generate(prompts, params, use_tqdm=False)
    wall = time.perf_counter() - t0
    texts = {k: o.outputs[0].text for k, o in zip(keys, outs)}
    tokens = sum(len(o.outputs[0].token_ids) for o in outs)
    return {"texts": texts, "tokens": tokens, "wall": wall, "tok_s": tokens / wall}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--json", metavar="PATH")
    ap.add_argument(
        "--schedules",
        default="queue,waves",
        help="which to run besides raw: queue, waves, and queue-beside (the queue with verification "
        "in threads beside the engine, as on a GPU; the CPU default verifies inline)",
    )
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    from tasksieve.pipeline.setup.models import ensure_default_model
    from tasksieve.schemas.config import ModelConfig, SamplingConfig
    from tasksieve.transforms.backends.vllm import VllmBackend
    from tasksieve.transforms.sample.stage import SamplePlan

    tasks = pool(args.copies)
    sampling = SamplingConfig(max_tokens=args.max_tokens)
    plan = SamplePlan(run_id="bench", model_id="smollm2", sampler_key=sampling.sampler_key(), sampling=sampling)
    backend = VllmBackend(str(ensure_default_model()), "smollm2", sampling, ModelConfig())
    by_hash = {t["content_hash"]: t for t in tasks}
    print(
        f"{len(tasks)} tasks ({args.copies} copies of the sample), sequential k={sampling.k}, "
        f"tasks_per_batch {sampling.tasks_per_batch}, max_tokens {args.max_tokens}",
        flush=True,
    )
    stage(tasks[-16:], backend, plan, "waves")  # warm-up: the engine's first steps, the verifiers' imports
    schedules = args.schedules.split(",")
    runs: dict[str, list[dict]] = {n: [] for n in schedules + ["raw", "raw+judge"]}
    first = None
    for r in range(args.repeat):
        order = schedules if r % 2 == 0 else schedules[::-1]
        for schedule in order:
            fig = stage(tasks, backend, plan, schedule)
            runs[schedule].append(fig)
            print(
                f"  {schedule:<6} {len(fig['attempts'])} attempts {fig['tokens']} tokens {fig['wall']:.1f} s "
                f"{fig['tok_s']:.1f} tok/s; with the judge's {len(fig['judge_requests'])} requests "
                f"{fig['all_tok_s']:.1f} tok/s (engine {fig['engine']:.1f} s)",
                flush=True,
            )
            first = first or fig
        for name, judge_requests in (("raw", ()), ("raw+judge", first["judge_requests"])):
            fig = raw(first["attempts"], by_hash, backend, plan, judge_requests)
            runs[name].append(fig)
            print(
                f"  {name:<9} {len(fig['texts']) + len(judge_requests)} requests {fig['tokens']} tokens "
                f"{fig['wall']:.1f} s {fig['tok_s']:.1f} tok/s",
                flush=True,
            )
    staged = [x for n in schedules for x in runs[n]]
    same_requests = all(
        {k: a["seed"] for k, a in x["attempts"].items()} == {k: a["seed"] for k, a in first["attempts"].items()}
        for x in staged
    )
    same_attempts = all(
        {k: (a["completion"], a["passed"]) for k, a in x["attempts"].items()}
        == {k: (a["completion"], a["passed"]) for k, a in first["attempts"].items()}
        for x in staged
    )
    as_raw = statistics.fmean(first["attempts"][k]["completion"] == t for k, t in runs["raw"][0]["texts"].items())
    med = {n: statistics.median(x["tok_s"] for x in runs[n]) for n in runs}
    with_judge = {n: statistics.median(x["all_tok_s"] for x in runs[n]) for n in schedules}
    summary = {
        "tasks": len(tasks),
        "attempts": len(first["attempts"]),
        "max_tokens": args.max_tokens,
        "repeat": args.repeat,
        "tok_s": {n: round(v, 1) for n, v in med.items()},
        # Issue 41's figure: the default schedule over raw vLLM.
        "engine_ratio": round(med["queue"] / med["raw"], 3) if "queue" in med else None,
        "ratios": {n: round(med[n] / med["raw"], 3) for n in schedules},
        # The same with the judge's requests on both sides: the stage's
        # attempt and judge completions over one raw call on both.
        "judge_requests": len(first["judge_requests"]),
        "tok_s_with_judge": {**{n: round(v, 1) for n, v in with_judge.items()}, "raw": round(med["raw+judge"], 1)},
        "ratios_with_judge": {n: round(with_judge[n] / med["raw+judge"], 3) for n in schedules},
        "same_requests_between_schedules": same_requests,
        "same_attempts_between_schedules": same_attempts,
        "completions_as_raw": round(as_raw, 4),
    }
    print(json.dumps(summary))
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
