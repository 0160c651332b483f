"""Attempts and tokens per learnable task for the stopping rules `fixed`,
`sequential` and `bayes` at k=8 and k=16, their agreement with `fixed`, and
the engine's busy fraction during sampling. All in one run:

1. Real: the bundled sample through the whole pipeline with the real small
   model (SmolLM2-135M on vLLM), `fixed` at k=16, recording every attempt.
   Because every attempt's seed depends only on (task, attempt_idx), a policy
   that stops early draws exactly a prefix of these attempts; so each policy
   is replayed over the recorded outcomes and tokens.
2. Engine busy fraction: real `sequential` and `bayes` runs at k=8, each with
   an empty attempt cache (time inside `generate` / sampling-stage wall).
3. Simulated: a pool whose pass-rate distribution matches the published case
   (about 55% of tasks all-pass at k=8), with tokens per attempt drawn from
   the real run's passing and failing attempts.

    .venv/bin/python bench/sampling_policies.py [--sim-tasks 20000] [--skip-real]

Ratios compare policies measured in this run; nothing here is a timed test.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

POLICIES = [  # (label, mode, bayes prior a=b, confidence)
    ("fixed", "fixed", None, None),
    ("sequential", "sequential", None, None),
    ("bayes (default)", "bayes", 0.1, 0.95),
    ("bayes conf 0.9", "bayes", 0.1, 0.9),
    ("bayes a=b=0.05", "bayes", 0.05, 0.95),
]


def _policy(mode, k, a, conf):
    from tasksieve.transforms.sample.policy import Policy

    if mode != "bayes":
        return Policy(mode, k)
    return Policy(mode, k, prior_a=a, prior_b=a, confidence=conf)


def drive(policy, outcomes) -> tuple[str, int]:
    from tasksieve.transforms.sample.classify import classify
    from tasksieve.transforms.sample.policy import next_attempts

    n = p = 0
    while True:
        more = next_attempts(policy, n, p)
        if more == 0:
            return classify(p, n)["status"], n
        for _ in range(more):
            p += outcomes[n]
            n += 1


def evaluate(tasks: list[tuple[list[int], list[int]]], k: int) -> list[dict]:
    """tasks: (outcomes, tokens) per attempt index, at least k of each."""
    rows, fixed_status = [], None
    for label, mode, a, conf in POLICIES:
        pol = _policy(mode, k, a, conf)
        statuses, attempts, tokens = [], 0, 0
        for outcomes, toks in tasks:
            status, n = drive(pol, outcomes[:k])
            statuses.append(status)
            attempts += n
            tokens += sum(toks[:n])
        if fixed_status is None:
            fixed_status = statuses
        learnable = sum(s == "learnable" for s in statuses)
        agree = sum(s == f for s, f in zip(statuses, fixed_status)) / len(tasks)
        kept = sum(s == f == "learnable" for s, f in zip(statuses, fixed_status))
        rows.append(
            {
                "policy": label,
                "k": k,
                "attempts": attempts,
                "learnable": learnable,
                "attempts_per_learnable": attempts / learnable if learnable else float("nan"),
                "tokens_per_learnable": tokens / learnable if learnable else float("nan"),
                "agreement": agree,
                "learnable_kept": kept,
                "learnable_fixed": fixed_status.count("learnable"),
            }
        )
    base = rows[0]
    for r in rows:
        r["attempts_vs_fixed"] = r["attempts"] / base["attempts"]
        r["tokens_per_learnable_vs_fixed"] = r["tokens_per_learnable"] / base["tokens_per_learnable"]
    return rows


def print_table(title: str, rows: list[dict]) -> None:
    print(f"\n{title}")
    print(
        f"{'policy':<17}{'k':>3}{'attempts':>9}{'x fixed':>8}{'learnable':>10}{'att/learn':>10}"
        f"{'tok/learn':>10}{'x fixed':>8}{'agree':>7}{'kept':>9}"
    )
    for r in rows:
        print(
            f"{r['policy']:<17}{r['k']:>3}{r['attempts']:>9}{r['attempts_vs_fixed']:>8.2f}{r['learnable']:>10}"
            f"{r['attempts_per_learnable']:>10.2f}{r['tokens_per_learnable']:>10.0f}"
            f"{r['tokens_per_learnable_vs_fixed']:>8.2f}{r['agreement']:>7.1%}"
            f"{r['learnable_kept']:>5}/{r['learnable_fixed']:<3}"
        )


def real_run(sample: Path, out: Path, mode: str, k: int) -> dict:
    from tasksieve.pipeline.run.command import run
    from tasksieve.schemas.config import RunConfig

    cfg = RunConfig.model_validate({"sampling": {"mode": mode, "k": k}, "attempt_cache": str(out / "cache")})
    t0 = time.perf_counter()
    fig = run([str(sample)], str(out), cfg, None, [])
    fig["wall"] = time.perf_counter() - t0
    return fig


def recorded_tasks(out: Path, k: int) -> list[tuple[list[int], list[int]]]:
    import pyarrow.parquet as pq

    by_hash: dict[str, list] = {}
    for a in pq.read_table(out / "attempts.parquet").to_pylist():
        by_hash.setdefault(a["content_hash"], []).append(a)
    tasks = []
    for rows in by_hash.values():
        rows.sort(key=lambda a: a["attempt_idx"])
        if len(rows) >= k:
            tasks.append(([int(bool(a["passed"])) for a in rows], [a["completion_tokens"] for a in rows]))
    return tasks


def simulated_pool(n: int, k: int, pass_tokens: list[int], fail_tokens: list[int]):
    """Pass rates from a mixture tuned to the published case: most tasks are
    (nearly) always solved, a fifth (nearly) never, the rest in between."""
    rng = random.Random(11)
    tasks = []
    for _ in range(n):
        u = rng.random()
        if u < 0.52:
            p = 1.0 if rng.random() < 0.85 else rng.betavariate(30, 1)
        elif u < 0.75:
            p = 0.0 if rng.random() < 0.85 else rng.betavariate(1, 30)
        else:
            p = rng.uniform(0.05, 0.95)
        outcomes = [int(rng.random() < p) for _ in range(k)]
        tokens = [rng.choice(pass_tokens if o else fail_tokens) for o in outcomes]
        tasks.append((outcomes, tokens))
    return tasks


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sim-tasks", type=int, default=20000)
    ap.add_argument("--skip-real", action="store_true", help="simulated pool only (tokens: 150 pass / 384 fail)")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    results = {}
    pass_tokens, fail_tokens = [150], [384]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if not args.skip_real:
            from tasksieve.pipeline.setup.sample_data import write_sample

            write_sample(tmp / "sample")
            sample = tmp / "sample" / "deliveries"
            print("real model, fixed k=16 on the bundled sample (records every attempt) ...", flush=True)
            fixed16 = real_run(sample, tmp / "fixed16", "fixed", 16)
            tasks = recorded_tasks(tmp / "fixed16", 16)
            pass_tokens = [t for o, ts in tasks for x, t in zip(o, ts) if x] or pass_tokens
            fail_tokens = [t for o, ts in tasks for x, t in zip(o, ts) if not x] or fail_tokens
            for k in (8, 16):
                rows = evaluate(tasks, k)
                results[f"real_k{k}"] = rows
                print_table(f"Bundled sample, real SmolLM2-135M, {len(tasks)} sampled tasks, k={k}", rows)
            busy = {"fixed k=16": fixed16}
            for mode in ("sequential", "bayes"):
                print(f"\nreal model, {mode} k=8, empty attempt cache (engine busy fraction) ...", flush=True)
                busy[f"{mode} k=8"] = real_run(sample, tmp / mode, mode, 8)
            print("\nEngine busy fraction (time inside generate / sampling-stage wall), real runs")
            print(f"{'run':<16}{'attempts':>9}{'engine s':>10}{'busy':>7}{'run wall s':>11}")
            for name, fig in busy.items():
                print(
                    f"{name:<16}{fig['attempts']:>9}{fig['engine_seconds']:>10.1f}"
                    f"{fig['engine_busy_fraction']:>7.1%}{fig['wall']:>11.1f}"
                )
            results["busy"] = {
                n: {k_: f[k_] for k_ in ("attempts", "engine_seconds", "engine_busy_fraction", "wall")}
                for n, f in busy.items()
            }
    for k in (8, 16):
        sim = simulated_pool(args.sim_tasks, k, pass_tokens, fail_tokens)
        all_pass = sum(all(o) for o, _ in sim) / len(sim)
        rows = evaluate(sim, k)
        results[f"sim_k{k}"] = rows
        print_table(f"Simulated pool, {len(sim)} tasks, {all_pass:.0%} all-pass at k={k}, k={k}", rows)
    print(
        "\n"
        + json.dumps(
            {"median_tokens": {"pass": statistics.median(pass_tokens), "fail": statistics.median(fail_tokens)}}
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
