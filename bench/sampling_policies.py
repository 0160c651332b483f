"""Attempts and GRPO signal of the stopping rules `fixed`, `sequential`,
`bayes` and `predicted` at k=8 and k=16, on simulated pools over several
seeds, and on the real small model. Issue 41's figures:

1. Simulated pools (bench/sampling_pools.py), each task with its true pass
   rate p: `flat` (the published case's mix, nothing predicts a task) and
   `text` (template, answer shape and topic shift the odds, plus noise).
   `signal_kept` = sum p(1-p) over the tasks a rule keeps / over fixed-k's
   learnable set; `attempts_ratio` = attempts / fixed-k's. Dev seeds chose
   the defaults; held-out seeds are the reported figures (mean and worst
   seed). `predicted` predicts each chunk of tasks (`--chunk`, the stage's
   batches) from the attempts of the chunks before it only.
2. The limit of any rule that sees only a task's own outcomes with one prior
   for all tasks (best pair of streak lengths, attempt by attempt).
3. Real (without --skip-real): the bundled sample with SmolLM2-135M, `fixed`
   at k=16 recording every attempt; each rule is replayed over them (a
   rule that stops early draws a prefix: seeds depend on (task, attempt)).
   Then bench/engine_feed.py: the stage's tokens/s over one raw vLLM
   `generate` on the same requests (`engine_ratio` in the JSON).

    .venv/bin/python bench/sampling_policies.py --skip-real [--json out.json]

Ratios compare rules measured in this run; nothing here is a timed test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

POLICIES = [  # label, mode, settings, whether these are the mode's default settings
    ("fixed", "fixed", {}, True),
    ("sequential", "sequential", {}, True),
    ("bayes (default)", "bayes", {"a": 0.1, "conf": 0.95}, True),
    ("bayes conf 0.9", "bayes", {"a": 0.1, "conf": 0.9}, False),
    ("predicted (default)", "predicted", {"keep": None}, True),  # None: [sampling.predicted] keep_signal
    ("predicted keep 0.9", "predicted", {"keep": 0.9}, False),
]


def _policy(mode, k, settings):
    from tasksieve.transforms.sample.policy import Policy

    if mode != "bayes":
        return Policy(mode if mode != "predicted" else "sequential", k)
    return Policy(mode, k, prior_a=settings["a"], prior_b=settings["a"], confidence=settings["conf"])


def drive(policy, outcomes) -> tuple[int, int, int]:
    from sampling_pools import drive as drive_fn
    from tasksieve.transforms.sample.policy import next_attempts

    return drive_fn(lambda n, p: next_attempts(policy, n, p), outcomes)


def evaluate(tasks: list[tuple], k: int, chunk: int = 1000) -> list[dict]:
    """tasks: (outcomes, tokens, true p, task) with at least k attempts each.
    signal_kept: sum p(1-p) over the tasks a rule keeps / over fixed's learnable set."""
    from sampling_pools import run_predicted, signal
    from tasksieve.transforms.sample.difficulty import calibration

    rows, fixed_status = [], None
    for label, mode, settings, is_default in POLICIES:
        if mode == "predicted":
            from tasksieve.schemas.config import PredictedConfig

            keep = settings["keep"] or PredictedConfig().keep_signal
            runs = list(run_predicted(tasks, k, keep, chunk=chunk))
        else:
            pol = _policy(mode, k, settings)
            runs = [(*drive(pol, o[:k]), None) for o, *_ in tasks]
        statuses = ["learnable" if 0 < s < n else "all_pass" if s == n else "all_fail" for s, n, _, _ in runs]
        attempts = sum(n for _, n, _, _ in runs)
        tokens = sum(sum(task[1][:n]) for (_, n, _, _), task in zip(runs, tasks))
        if fixed_status is None:
            fixed_status = statuses
        sig = sum(signal(t[2]) for t, st in zip(tasks, statuses) if st == "learnable")
        fixed_sig = sum(signal(t[2]) for t, st in zip(tasks, fixed_status) if st == "learnable")
        learnable = statuses.count("learnable")
        row = {
            "policy": label,
            "k": k,
            "default": is_default,
            "attempts": attempts,
            "learnable": learnable,
            "attempts_ratio": attempts / (k * len(tasks)),
            "signal_kept": sig / fixed_sig if fixed_sig else 1.0,
            "waves_per_task": sum(w for _, _, w, _ in runs) / len(tasks),
            "tokens_per_learnable": tokens / learnable if learnable else float("nan"),
            "agreement": sum(s == f for s, f in zip(statuses, fixed_status)) / len(tasks),
            "learnable_kept": sum(s == f == "learnable" for s, f in zip(statuses, fixed_status)),
            "learnable_fixed": fixed_status.count("learnable"),
        }
        if mode == "predicted":
            pred = [r[3] for r in runs]
            row["brier_true_p"] = calibration(pred, [t[2] for t in tasks])["brier"]
            cal = calibration(pred, [s / n for s, n, _, _ in runs])
            row["brier"], row["brier_constant"] = cal["brier"], cal["brier_constant"]
        rows.append(row)
    return rows


def print_table(title: str, rows: list[dict]) -> None:
    print(f"\n{title}")
    print(
        f"{'policy':<21}{'k':>3}{'x fixed':>8}{'signal':>8}{'worst x':>8}{'worst sig':>10}{'waves':>6}"
        f"{'learnable':>10}{'tok/learn':>10}{'agree':>7}"
    )
    for r in rows:
        print(
            f"{r['policy']:<21}{r['k']:>3}{r['attempts_ratio']:>8.3f}{r['signal_kept']:>8.3f}"
            f"{r.get('worst_attempts_ratio', r['attempts_ratio']):>8.3f}"
            f"{r.get('worst_signal_kept', r['signal_kept']):>10.3f}{r['waves_per_task']:>6.2f}"
            f"{r['learnable']:>10.0f}{r['tokens_per_learnable']:>10.0f}{r['agreement']:>7.1%}"
        )


def over_seeds(per_seed: list[list[dict]]) -> list[dict]:
    """Mean over seeds, with the worst seed's attempts ratio and signal kept."""
    out = []
    for rows in zip(*per_seed):
        r = dict(rows[0])
        for key in (
            "attempts_ratio",
            "signal_kept",
            "waves_per_task",
            "tokens_per_learnable",
            "agreement",
            "learnable",
            "brier",
            "brier_true_p",
            "brier_constant",
        ):
            if key in r:
                r[key] = statistics.fmean(x[key] for x in rows)
        r["worst_attempts_ratio"] = max(x["attempts_ratio"] for x in rows)
        r["worst_signal_kept"] = min(x["signal_kept"] for x in rows)
        out.append(r)
    return out


def real_run(sample: Path, out: Path, mode: str, k: int) -> dict:
    from tasksieve.pipeline.run.command import run
    from tasksieve.schemas.config import RunConfig

    cfg = RunConfig.model_validate({"sampling": {"mode": mode, "k": k}, "attempt_cache": str(out / "cache")})
    t0 = time.perf_counter()
    fig = run([str(sample)], str(out), cfg, None, [])
    fig["wall"] = time.perf_counter() - t0
    return fig


def recorded_tasks(out: Path, k: int) -> list[tuple]:
    """(outcomes, tokens, p, task) per task with k recorded attempts; p is
    its pass rate over all k (the real pool's best estimate of the truth)."""
    import pyarrow.parquet as pq

    by_hash: dict[str, list] = {}
    for a in pq.read_table(out / "attempts.parquet").to_pylist():
        by_hash.setdefault(a["content_hash"], []).append(a)
    task_of = {r["content_hash"]: r for r in pq.read_table(out / "results.parquet").to_pylist()}
    tasks = []
    for h, rows in sorted(by_hash.items()):
        rows.sort(key=lambda a: a["attempt_idx"])
        if len(rows) >= k:
            outcomes = [int(bool(a["passed"])) for a in rows]
            tasks.append(
                (outcomes, [a["completion_tokens"] for a in rows], sum(outcomes) / len(outcomes), task_of.get(h, {}))
            )
    return tasks


def real_part(results: dict, pass_tokens: list[int], fail_tokens: list[int]) -> tuple[list[int], list[int]]:
    """The bundled sample with the real model: fixed k=16 recorded, each rule
    replayed over it; engine busy fractions. Tokens per pass / fail come back."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        from tasksieve.pipeline.setup.sample_data import write_sample

        write_sample(tmp / "sample")
        sample = tmp / "sample" / "deliveries"
        print("real model, fixed k=16 on the bundled sample (records every attempt) ...", flush=True)
        fixed16 = real_run(sample, tmp / "fixed16", "fixed", 16)
        tasks = recorded_tasks(tmp / "fixed16", 16)
        pass_tokens = [t for o, ts, *_ in tasks for x, t in zip(o, ts) if x] or pass_tokens
        fail_tokens = [t for o, ts, *_ in tasks for x, t in zip(o, ts) if not x] or fail_tokens
        for k in (8, 16):
            rows = evaluate(tasks, k, chunk=32)
            results[f"real_k{k}"] = rows
            print_table(
                f"Bundled sample, real SmolLM2-135M, {len(tasks)} sampled tasks, k={k} (p = pass rate over 16)", rows
            )
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
        # Is the engine kept fed (item 3)? engine_feed.py: the stage's
        # tokens/s under the default schedule over raw `generate`.
        print("\nengine feed: the sampling stage vs one raw generate call (bench/engine_feed.py) ...", flush=True)
        subprocess.run(
            [sys.executable, str(ROOT / "bench" / "engine_feed.py"), "--json", str(tmp / "feed.json")], check=True
        )
        results["engine_ratio"] = json.loads((tmp / "feed.json").read_text())["engine_ratio"]
    return pass_tokens, fail_tokens


def sim_part(args, results: dict, pass_tokens: list[int], fail_tokens: list[int]) -> list[dict]:
    """Every rule on each simulated pool, k = 8 and 16, dev and held-out seeds;
    the JSON rows of issue 41."""
    from sampling_pools import POOLS, streak_frontier

    json_rows = []
    seed_sets = {
        "dev": [int(x) for x in args.dev_seeds.split(",") if x],
        "held-out": [int(x) for x in args.seeds.split(",") if x],
    }
    for pool_name, make in POOLS.items():
        for k in (8, 16):
            for which, seeds in seed_sets.items():
                if not seeds:
                    continue
                per_seed = [
                    evaluate(make(args.sim_tasks, k, pass_tokens, fail_tokens, seed=s), k, args.chunk) for s in seeds
                ]
                rows = over_seeds(per_seed)
                results[f"{pool_name}_k{k}_{which}"] = rows
                print_table(
                    f"Pool {pool_name!r}, {args.sim_tasks} tasks, k={k}, {which} seeds {seeds} (mean; worst seed)", rows
                )
                json_rows += [
                    {
                        "policy": r["policy"],
                        "k": k,
                        "default": r["default"],
                        "attempts_ratio": round(r["attempts_ratio"], 4),
                        "signal_kept": round(r["signal_kept"], 4),
                        "pool": pool_name,
                        "seeds": which,
                        "worst_attempts_ratio": round(r["worst_attempts_ratio"], 4),
                        "worst_signal_kept": round(r["worst_signal_kept"], 4),
                        **(
                            {"brier": round(r["brier"], 4), "brier_constant": round(r["brier_constant"], 4)}
                            if "brier" in r
                            else {}
                        ),
                    }
                    for r in rows
                ]
            front = streak_frontier(make(min(args.sim_tasks, 3000), k, [1], [1], seed=seed_sets["held-out"][0]), k)
            print(f"limit of one-prior-for-all rules on {pool_name!r}, k={k}: {front}")
            json_rows.append(
                {
                    "policy": "streak frontier (one prior for all, best of all (a, b))",
                    "k": k,
                    "default": False,
                    "pool": pool_name,
                    "seeds": "held-out",
                    **{key: round(v, 4) if isinstance(v, float) else v for key, v in front.items()},
                }
            )
    return json_rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sim-tasks", type=int, default=4000)
    ap.add_argument("--dev-seeds", default="1,2,3", help="seeds the defaults were chosen on")
    ap.add_argument("--seeds", default="7,8,9", help="held-out seeds: the reported figures")
    ap.add_argument("--chunk", type=int, default=250, help="tasks predicted together, from the chunks before")
    ap.add_argument("--skip-real", action="store_true", help="simulated pools only (tokens: 150 pass / 384 fail)")
    ap.add_argument("--skip-sim", action="store_true", help="the real model only")
    ap.add_argument("--json", metavar="PATH", help="write the figures as JSON rows (issue 41)")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "bench"))
    results = {}
    pass_tokens, fail_tokens = [150], [384]
    if not args.skip_real:
        pass_tokens, fail_tokens = real_part(results, pass_tokens, fail_tokens)
    json_rows = [
        {
            "policy": r["policy"],
            "k": r["k"],
            "default": r["default"],
            "attempts_ratio": round(r["attempts_ratio"], 4),
            "signal_kept": round(r["signal_kept"], 4),
            "pool": "real (SmolLM2-135M, bundled sample; p = pass rate over 16)",
        }
        for k in (8, 16)
        for r in results.get(f"real_k{k}", [])
    ]
    json_rows += [] if args.skip_sim else sim_part(args, results, pass_tokens, fail_tokens)
    print(
        "\n"
        + json.dumps(
            {"median_tokens": {"pass": statistics.median(pass_tokens), "fail": statistics.median(fail_tokens)}}
        )
    )
    if args.json:
        json_rows.append({"engine_ratio": results.get("engine_ratio")})
        Path(args.json).write_text(json.dumps(json_rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
