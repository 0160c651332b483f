"""The cheap stages (read, validate, hash, exact dedup, decontaminate) on a
synthetic pool, on the in-process runner and on Beam's DaskRunner with 1
and 2 local worker processes, in one run. Reports tasks/s, the ratio to the
in-process runner, and peak memory (max RSS) of the driver and per worker.

The pool is real task text (reasoning-gym arithmetic in several phrasings)
with 5% planted exact duplicates. Its tasks are `rubric` tasks whose only
criterion is blank, so they leave the funnel at `verifier_sanity` (reason
`no_criteria`, no judge call) before any engine is needed: this measures
the cheap stages and the accounting only.

    .venv/bin/python bench/runners.py [--tasks 100000]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

PHRASES = [
    "Calculate {e}.",
    "What is {e}?",
    "Compute the value of {e} and explain each step.",
    "A vendor asks: evaluate {e}, then state the result in words.",
]


def make_pool(path: Path, n: int) -> None:
    import reasoning_gym as rg

    items = rg.create_dataset(
        "basic_arithmetic", size=min(n, 20000), seed=7, min_terms=2, max_terms=5, min_digits=1, max_digits=4
    )
    exprs = [x["metadata"]["expression"] for x in items]
    rng = random.Random(0)
    with open(path, "w") as fh:
        for i in range(n):
            dup = i > 0 and rng.random() < 0.05
            j = rng.randrange(i) if dup else i
            e = exprs[j % len(exprs)]
            prompt = PHRASES[j % len(PHRASES)].format(e=e) + ("" if j < len(exprs) else f" (variant {j // len(exprs)})")
            fh.write(
                json.dumps(
                    {
                        "task_id": f"t{i}",
                        "source": f"vendor_{i % 3}",
                        "domain": "rubric",
                        "prompt": prompt,
                        "rubric": [" "],
                        "expert_minutes": 3,
                    }
                )
                + "\n"
            )


class _NoEngine:
    """The pool never reaches sampling; an engine call would be a bug."""

    model_id = "none@bench"

    def generate(self, requests):
        raise AssertionError("the runner bench must not sample")


def no_engine():
    return _NoEngine()


no_engine.model_id = _NoEngine.model_id


def one(pool: Path, runner: str | None, workers: int) -> dict:
    import contextlib
    import io

    from tasksieve.pipeline.run.execute import dask_cluster
    from tasksieve.pipeline.run.command import run
    from tasksieve.schemas.config import RunConfig

    out = Path(tempfile.mkdtemp(prefix="bench-runners-"))
    worker_rss = []
    with contextlib.ExitStack() as stack:
        address = None
        if runner == "dask":
            address = stack.enter_context(dask_cluster(None, workers))
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            fig = run(
                [str(pool)],
                str(out),
                RunConfig(),
                runner,
                [],
                backend_factory=no_engine,
                dask_address=address,
                dask_workers=workers,
            )
        wall = time.perf_counter() - t0
        if address:
            from distributed import Client

            with Client(address) as client:
                worker_rss = list(client.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss).values())
    return {
        "wall": wall,
        "rows": fig["rows_in"],
        "dropped": fig["dropped"],
        "driver_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "worker_mb": [r / 1024 for r in worker_rss],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=100_000)
    ap.add_argument("--one", nargs=2, metavar=("RUNNER", "WORKERS"), help=argparse.SUPPRESS)
    ap.add_argument("--pool", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        runner = None if args.one[0] == "inprocess" else args.one[0]
        print("RESULT " + json.dumps(one(Path(args.pool), runner, int(args.one[1]))))
        return
    import subprocess

    pool = Path(tempfile.mkdtemp(prefix="bench-pool-")) / "pool.jsonl"
    make_pool(pool, args.tasks)
    rows = {}
    # Each configuration in its own process, so peak memory is its own.
    for label, runner, workers in [
        ("inprocess", "inprocess", 1),
        ("dask, 1 worker", "dask", 1),
        ("dask, 2 workers", "dask", 2),
    ]:
        proc = subprocess.run(
            [sys.executable, __file__, "--one", runner, str(workers), "--pool", str(pool)],
            capture_output=True,
            text=True,
        )
        line = next((l for l in proc.stdout.splitlines() if l.startswith("RESULT ")), None)
        rows[label] = json.loads(line[len("RESULT ") :]) if line else None
        if line is None:
            print(f"{label} failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
    base = rows["inprocess"]
    print(f"pool: {args.tasks} tasks (5% planted duplicates); cheap stages + accounting")
    print(f"{'runner':<18}{'tasks/s':>9}{'ratio':>7}{'driver MB':>11}{'worker MB':>16}")
    for label, r in rows.items():
        if r is None or base is None:
            print(f"{label:<18}{'failed':>9}")
            continue
        tps = r["rows"] / r["wall"]
        workers = "/".join(f"{m:.0f}" for m in r["worker_mb"]) or "-"
        print(f"{label:<18}{tps:>9.0f}{tps / (base['rows'] / base['wall']):>7.2f}{r['driver_mb']:>11.0f}{workers:>16}")


if __name__ == "__main__":
    main()
