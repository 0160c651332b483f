"""Sandbox overhead per code verification: one HumanEval-style attempt and
its tests, run N times by plain in-process exec (no isolation at all), by
the rlimit fallback (a fresh subprocess), and by bubblewrap. Prints the
mean wall time of each and its ratio to plain exec and to the fallback.

    .venv/bin/python bench/sandbox.py [--n 30]
"""

from __future__ import annotations

import argparse
import statistics
import time

SOLUTION = "def add(a, b):\n    return a + b\n"
TESTS = "def check(candidate):\n" + "".join(f"    assert candidate({i}, {i}) == {2 * i}\n" for i in range(50))
CASE = {"solution": SOLUTION, "tests": TESTS, "entry_point": "add", "call_check": True}


def plain_exec() -> None:
    ns: dict = {}
    exec(compile(SOLUTION, "<attempt>", "exec"), ns)
    exec(compile(TESTS, "<tests>", "exec"), ns)
    ns["check"](ns["add"])


def timed(fn, n: int) -> list[float]:
    fn()  # warm-up: the first call pays one-off probes
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def main() -> None:
    from tasksieve.transforms.verify.sandbox import runner as sandbox

    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=30)
    args = ap.parse_args()
    rows = {"plain exec (no isolation)": timed(plain_exec, args.n)}

    def sandboxed(mode):
        def go():
            res = sandbox.run_cases([CASE], sandbox.Limits(), mode=mode).results[0]
            assert res.passed, res.error

        return go

    rows["rlimit subprocess"] = timed(sandboxed("rlimit"), args.n)
    if sandbox.resolve_mode("auto") == "bwrap":
        rows["bubblewrap"] = timed(sandboxed("bwrap"), args.n)
    base = statistics.mean(rows["plain exec (no isolation)"])
    sub = statistics.mean(rows["rlimit subprocess"])
    print(f"{args.n} verifications each (50 asserts per attempt)")
    print(f"{'mode':<28}{'mean ms':>9}{'p90 ms':>9}{'x plain':>10}{'x rlimit':>10}")
    for label, ts in rows.items():
        m = statistics.mean(ts)
        p90 = sorted(ts)[int(0.9 * (len(ts) - 1))]
        print(f"{label:<28}{m * 1e3:>9.2f}{p90 * 1e3:>9.2f}{m / base:>10.0f}{m / sub:>10.2f}")


if __name__ == "__main__":
    main()
