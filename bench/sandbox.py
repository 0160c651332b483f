"""Sandbox overhead per code verification: one HumanEval-style attempt and
its tests (50 asserts), run N times by plain in-process exec (no isolation
at all), by the rlimit fallback (a fresh subprocess per case), by
bubblewrap with a fresh pair of sandboxes per case (the old path), and by
pooled bubblewrap sandboxes (the default: a fresh forked child per case).
The modes take turns, `--repeat` rounds of N each, so load on the machine
falls on all of them alike. Prints mean and p90 wall time per verification
and the ratio to plain exec and to the per-case bubblewrap path; then the
throughput with one verification thread per core.

    .venv/bin/python bench/sandbox.py [--n 30] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

SOLUTION = "def add(a, b):\n    return a + b\n"
TESTS = "def check(candidate):\n" + "".join(f"    assert candidate({i}, {i}) == {2 * i}\n" for i in range(50))
CASE = {"solution": SOLUTION, "tests": TESTS, "entry_point": "add", "call_check": True}


def plain_exec() -> None:
    ns: dict = {}
    exec(compile(SOLUTION, "<attempt>", "exec"), ns)
    exec(compile(TESTS, "<tests>", "exec"), ns)
    ns["check"](ns["add"])


def main() -> None:
    from tasksieve.transforms.verify.sandbox import runner as sandbox

    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    def sandboxed(mode, pooled):
        def go():
            sandbox.POOLED = pooled
            res = sandbox.run_cases([CASE], sandbox.Limits(), mode=mode).results[0]
            assert res.passed, res.error

        return go

    modes = {"plain exec (no isolation)": plain_exec, "rlimit subprocess": sandboxed("rlimit", False)}
    bwrap = sandbox.resolve_mode("auto") == "bwrap"
    if bwrap:
        modes["bubblewrap, per case"] = sandboxed("bwrap", False)
        modes["bubblewrap, pooled"] = sandboxed("bwrap", True)
    for fn in modes.values():
        fn()  # warm-up: one-off probes, the pool's first workers
    rows: dict[str, list[float]] = {label: [] for label in modes}
    for _ in range(args.repeat):
        for label, fn in modes.items():
            for _ in range(args.n):
                t0 = time.perf_counter()
                fn()
                rows[label].append(time.perf_counter() - t0)
    base = statistics.mean(rows["plain exec (no isolation)"])
    ref = statistics.mean(rows["bubblewrap, per case"]) if bwrap else None
    print(f"{args.repeat} rounds x {args.n} verifications per mode (50 asserts per attempt), one thread")
    print(f"{'mode':<28}{'mean ms':>9}{'p90 ms':>9}{'x plain':>10}{'x bwrap per case':>18}")
    for label, ts in rows.items():
        m = statistics.mean(ts)
        p90 = sorted(ts)[int(0.9 * (len(ts) - 1))]
        vs = f"{m / ref:>18.2f}" if ref else f"{'-':>18}"
        print(f"{label:<28}{m * 1e3:>9.2f}{p90 * 1e3:>9.2f}{m / base:>10.0f}{vs}")
    if not bwrap:
        return
    threads = os.cpu_count() or 1
    print(f"\nthroughput, {threads} threads (one per core), {args.n * threads} verifications each:")
    for label in ("bubblewrap, per case", "bubblewrap, pooled"):
        fn = modes[label]
        with ThreadPoolExecutor(threads) as ex:
            list(ex.map(lambda _, fn=fn: fn(), range(threads)))  # every thread's workers started
            t0 = time.perf_counter()
            list(ex.map(lambda _, fn=fn: fn(), range(args.n * threads)))
            dt = time.perf_counter() - t0
        print(f"{label:<28}{args.n * threads / dt:>9.1f} verifications/s")
    sandbox.POOLED = True


if __name__ == "__main__":
    main()
