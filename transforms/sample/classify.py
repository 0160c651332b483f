"""Stage `classify`: attempts in, a status per task out.

learnable: at least one pass and one fail, and the pass rate inside the
configured band. all_pass / all_fail: every attempt passed / failed (the
trainer learns nothing from them). A mixed task outside a narrowed band is
`dropped` at this stage with reason `pass_rate_above_band` or
`pass_rate_below_band`.

Difficulty buckets (by observed pass rate): solved (1), easy (>= 0.75),
medium (>= 0.25), hard (> 0), unsolved (0). With sequential sampling a
learnable task may have stopped after two attempts, so its bucket is coarse;
the Wilson interval in pass_rate_lo/pass_rate_hi says how coarse.
"""

from __future__ import annotations

import math

STAGE = "classify"


def wilson_interval(n_pass: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval for a binomial proportion."""
    if n == 0:
        return 0.0, 1.0
    p = n_pass / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def difficulty_bucket(pass_rate: float) -> str:
    if pass_rate >= 1.0:
        return "solved"
    if pass_rate >= 0.75:
        return "easy"
    if pass_rate >= 0.25:
        return "medium"
    if pass_rate > 0.0:
        return "hard"
    return "unsolved"


def classify(n_pass: int, n_attempts: int, min_pass_rate: float = 0.0, max_pass_rate: float = 1.0) -> dict:
    """Status and statistics for one task's attempts."""
    if n_attempts <= 0:
        raise ValueError("a task reaches classify only with attempts")
    rate = n_pass / n_attempts
    lo, hi = wilson_interval(n_pass, n_attempts)
    out = {
        "n_attempts": n_attempts,
        "n_pass": n_pass,
        "pass_rate": rate,
        "pass_rate_lo": lo,
        "pass_rate_hi": hi,
        "difficulty": difficulty_bucket(rate),
        "drop_stage": None,
        "drop_reason": None,
        "drop_detail": None,
    }
    if n_pass == n_attempts:
        out["status"] = "all_pass"
    elif n_pass == 0:
        out["status"] = "all_fail"
    elif rate > max_pass_rate:
        out.update(status="dropped", drop_stage=STAGE, drop_reason="pass_rate_above_band")
    elif rate < min_pass_rate:
        out.update(status="dropped", drop_stage=STAGE, drop_reason="pass_rate_below_band")
    else:
        out["status"] = "learnable"
    return out
