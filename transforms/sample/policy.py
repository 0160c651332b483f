"""When to stop sampling a task: the per-task stopping rules, Beam-free.
tests/sample/test_sampling_policy.py holds their property tests.

`fixed` asks for all k attempts at once.

`sequential` asks in waves and stops a task as soon as it has both a pass
and a fail. With the default band (learnable = at least one pass and one
fail) the keep/drop decision is the same as `fixed` with the same k: a task
that has shown both outcomes is learnable whatever the remaining attempts
say, and a task that has not shown both is sampled until k, exactly as
`fixed` would. With a narrowed band (say 0.1 <= pass rate <= 0.9) early
stopping would change decisions, so `sequential` then samples all k.

`bayes` keeps a Beta(prior_a + passes, prior_b + fails) posterior on each
task's pass rate and stops once the decision is `confidence`-probable:
- default band: a pass and a fail decide, as in `sequential`. A task that
  has only passed stops when P(the remaining k - n attempts would all pass)
  >= confidence, i.e. when `fixed` would almost surely call it all_pass;
  likewise for all_fail. So it stops only where `sequential` would have
  gone on to k, and its decisions differ from `fixed` with probability
  about 1 - confidence on exactly those tasks (measured: bench/).
- narrowed band [lo, hi]: stops when P(lo <= p <= hi) >= confidence or
  <= 1 - confidence; the status still comes from the observed pass rate.
The prior matters: with a uniform Beta(1, 1), four passes in four say
little; a U-shaped prior (most tasks are always or never solved) lets a
streak convince early. `pass_rate_lo`/`pass_rate_hi` are then the posterior's
95% interval.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

MODES = ("fixed", "sequential", "bayes")


@dataclass(frozen=True)
class Policy:
    mode: str
    k: int
    waves: tuple = (2, 2, 4)
    min_pass_rate: float = 0.0
    max_pass_rate: float = 1.0
    prior_a: float = 0.1
    prior_b: float = 0.1
    confidence: float = 0.95

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"unknown sampling mode {self.mode!r}")

    @property
    def band_is_default(self) -> bool:
        return default_band(self.min_pass_rate, self.max_pass_rate)


def default_band(min_pass_rate: float, max_pass_rate: float) -> bool:
    return min_pass_rate <= 0.0 and max_pass_rate >= 1.0


def _wave_size(waves, n_done: int) -> int:
    """The size of the wave that attempt `n_done` falls in; the last size repeats."""
    done_so_far, i = 0, 0
    while True:
        size = waves[min(i, len(waves) - 1)]
        if done_so_far + size > n_done:
            return done_so_far + size - n_done
        done_so_far += size
        i += 1


def prob_rest_all_same(a: float, b: float, n_same: int, n_done: int, remaining: int) -> float:
    """P(the next `remaining` attempts all repeat the one outcome seen so far)
    for a Beta(a, b) prior after `n_same` of `n_done` attempts had it and the
    rest (none) did not: E[p^m] under Beta(a + n_same, b) = B(a+s+m, b) / B(a+s, b)."""
    return math.exp(
        math.lgamma(a + n_same + remaining)
        - math.lgamma(a + n_same)
        + math.lgamma(a + b + n_done)
        - math.lgamma(a + b + n_done + remaining)
    )


def prob_in_band(a: float, b: float, lo: float, hi: float) -> float:
    from scipy.special import betainc

    return float(betainc(a, b, hi) - betainc(a, b, lo))


def bayes_decided(p: Policy, n_done: int, n_pass: int) -> bool:
    remaining = p.k - n_done
    if remaining <= 0:
        return True
    n_fail = n_done - n_pass
    if n_done < min(p.waves[0], p.k):
        return False  # the prior alone decides nothing: always one wave first
    if p.band_is_default:
        if n_pass and n_fail:
            return True
        # Only one outcome so far (n_fail == 0 or n_pass == 0): would the rest repeat it?
        same_a, other_b = (p.prior_a, p.prior_b) if n_fail == 0 else (p.prior_b, p.prior_a)
        return prob_rest_all_same(same_a, other_b, n_done, n_done, remaining) >= p.confidence
    inside = prob_in_band(p.prior_a + n_pass, p.prior_b + n_fail, p.min_pass_rate, p.max_pass_rate)
    return inside >= p.confidence or inside <= 1 - p.confidence


def next_attempts(p: Policy, n_done: int, n_pass: int) -> int:
    """How many more attempts to ask for now; 0 means the task is decided."""
    remaining = p.k - n_done
    if remaining <= 0:
        return 0
    if p.mode == "fixed" or (p.mode == "sequential" and not p.band_is_default):
        return remaining
    if p.mode == "sequential":
        if 0 < n_pass < n_done:
            return 0  # a pass and a fail: learnable, whatever comes next
    elif bayes_decided(p, n_done, n_pass):
        return 0
    return min(_wave_size(p.waves, n_done), remaining)


def posterior_interval(p: Policy, n_pass: int, n_done: int, mass: float = 0.95) -> tuple[float, float]:
    """Equal-tailed credible interval of the Beta posterior."""
    from scipy.stats import beta

    dist = beta(p.prior_a + n_pass, p.prior_b + n_done - n_pass)
    tail = (1 - mass) / 2
    return float(dist.ppf(tail)), float(dist.ppf(1 - tail))


def attempt_seed(base_seed: int, content_hash: str, attempt_idx: int) -> int:
    """A distinct, reproducible seed per attempt: identical seeds make
    identical samples, and a resumed run must redraw the same attempt."""
    h = hashlib.sha256(f"{base_seed}:{content_hash}:{attempt_idx}".encode()).digest()
    return int.from_bytes(h[:4], "big") & 0x7FFFFFFF
