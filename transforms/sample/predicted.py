"""The `predicted` stopping rule: each task starts from its own prior on the
pass rate (difficulty.py), and the batch keeps a set share of the signal.
Beam-free.

A pass and a fail decide (learnable), as in `sequential`. While a task has
shown one outcome only (a streak of n passes, or of n fails), its posterior
over p is its prior times the streak's likelihood, and one more attempt is
worth E[p(1 - p) (1 - q)]: the GRPO signal p(1 - p) of the task times the
chance q' = 1 - q that the attempt breaks the streak (q = p for a run of
passes, 1 - p for fails), which is what makes the task learnable. The task
stops at the first streak length where that is at most `price`, the signal
one attempt must buy (a one-step look-ahead; the value of an attempt only
falls as a streak grows, so looking further would not stop it later).

So each task has two stop points fixed before its first attempt: after
`a` passes in a row, or `b` fails in a row (`stop_points`). A task its prior
calls all-pass with confidence gets a = 1 or 2 (a short screening); a task
whose prior is spread over the middle gets a = k. Each wave asks for the
attempts up to the next stop point, never more than the wave schedule's size
there.

`price` is not set by hand: `price_for` picks, per batch, the largest price
whose expected signal lost (under the batch's own priors) is at most
1 - `keep_signal` of the signal `fixed` would keep. With a flat prior
(nothing known) that is the best pair of streak lengths for the pool; where
the text says which tasks are easy or hopeless, it screens those and spends
the attempts where the signal is. Measured: bench/sampling_policies.py.
"""

from __future__ import annotations

import numpy as np

from tasksieve.transforms.sample.difficulty import GRID

_SIGNAL = GRID * (1.0 - GRID)


def _stop_at(priors: np.ndarray, k: int, price: float, q: np.ndarray) -> np.ndarray:
    """Per task, the first streak length n in 1..k at which one more attempt
    is worth <= price (k if none): q is the chance, per p, that the streak goes on."""
    priors = np.atleast_2d(priors)
    stop = np.full(len(priors), k, dtype=np.int64)
    undecided = np.ones(len(priors), dtype=bool)
    lik = np.ones_like(GRID)
    for n in range(1, k):
        lik = lik * q
        w = priors * lik
        s = w.sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            value = (w @ (_SIGNAL * (1.0 - q))) / s
        # A prior that rules the streak out (s == 0) knows nothing of it: go on.
        here = undecided & (s > 0) & (value <= price)
        stop[here] = n
        undecided &= ~here
        if not undecided.any():
            break
    return stop


def stop_points(priors: np.ndarray, k: int, price: float) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) per task: stop after a passes in a row, or b fails in a row."""
    return _stop_at(priors, k, price, GRID), _stop_at(priors, k, price, 1.0 - GRID)


def expected(priors: np.ndarray, k: int, a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    """Under the priors: (signal `fixed` keeps, signal these stop points lose, attempts)."""
    priors = np.atleast_2d(priors)
    p, f = GRID[None, :], 1.0 - GRID[None, :]
    a, b = a[:, None], b[:, None]
    fixed = (1.0 - p**k - f**k) * _SIGNAL
    lost = (p**a * (1.0 - p ** (k - a)) + f**b * (1.0 - f ** (k - b))) * _SIGNAL
    with np.errstate(divide="ignore", invalid="ignore"):
        runs = np.where(p < 1, (1 - p**a) / (1 - p), a) + np.where(f < 1, (1 - f**b) / (1 - f), b) - 1
    return float((priors * fixed).sum()), float((priors * lost).sum()), float((priors * runs).sum())


# Never less: an attempt worth under 1/1000 of a coin-flip task's signal
# (0.25) is not bought, even where the batch as predicted holds almost no
# signal (every task predicted all-pass or all-fail), so that keeping 95% of
# almost nothing does not mean sampling every task to k.
MIN_PRICE = 0.00025


def price_for(priors: np.ndarray, k: int, keep_signal: float, min_price: float = MIN_PRICE) -> float:
    """The largest price (to 2%) whose expected loss is <= 1 - keep_signal of
    fixed's expected signal, under these priors; at least `min_price`."""
    return max(_relative_price(np.atleast_2d(priors), k, keep_signal), min_price)


def _relative_price(priors: np.ndarray, k: int, keep_signal: float) -> float:
    fixed, _, _ = expected(priors, k, np.full(len(priors), k), np.full(len(priors), k))
    if fixed <= 0:
        return 0.0

    def ok(price):
        _, lost, _ = expected(priors, k, *stop_points(priors, k, price))
        return lost <= (1.0 - keep_signal) * fixed

    lo, hi = 1e-7, 0.25  # p(1 - p) <= 0.25: no attempt is worth more
    if not ok(lo):
        return 0.0
    while hi / lo > 1.02:
        mid = (lo * hi) ** 0.5
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo


def _schedule_size(waves, n_done: int) -> int:
    done, i = 0, 0
    while True:
        size = waves[min(i, len(waves) - 1)]
        if done + size > n_done:
            return done + size - n_done
        done += size
        i += 1


def next_predicted(stops: tuple[int, int], k: int, waves, n_done: int, n_pass: int) -> int:
    """How many more attempts to ask for now (0: decided), for a task whose
    stop points are `stops` = (after a passes in a row, after b fails in a row)."""
    a, b = stops
    remaining = k - n_done
    if remaining <= 0 or 0 < n_pass < n_done:
        return 0  # k reached, or a pass and a fail: decided
    if n_done == 0:
        target = min(a, b)
    else:
        target = a if n_pass == n_done else b
        if n_done >= target:
            return 0
    return max(1, min(_schedule_size(waves, n_done), remaining, target - n_done))
