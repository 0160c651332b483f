"""Agreement between the judge and people: observed agreement and Cohen's kappa.

A label is one (graded response, criterion) pair: the grader's bool and the
judge's. Kappa = (p_o - p_e) / (1 - p_e), p_e from each rater's own YES
rate (Cohen 1960). When both raters say the same thing for every label
(p_e = 1) kappa is undefined (None): a set of labels with no NO (or no
YES) cannot tell a judge that reads from one that always says YES. The
95% interval is a percentile bootstrap over labels (fixed seed), given
when there are at least `min_n` labels. The gate's threshold and its
source: schemas/config.py, JudgeConfig.min_kappa.
"""

from __future__ import annotations

import random


def observed_agreement(human: list[bool], judge: list[bool]) -> float | None:
    if not human:
        return None
    return sum(h == j for h, j in zip(human, judge)) / len(human)


def cohen_kappa(human: list[bool], judge: list[bool]) -> float | None:
    n = len(human)
    if n == 0 or n != len(judge):
        return None
    p_o = sum(h == j for h, j in zip(human, judge)) / n
    ph, pj = sum(human) / n, sum(judge) / n
    p_e = ph * pj + (1 - ph) * (1 - pj)
    if p_e >= 1.0 - 1e-12:
        return None
    # Rounded (and -0.0 made 0.0): float noise such as 9.5e-17 is no agreement.
    return round((p_o - p_e) / (1 - p_e), 12) + 0.0


def bootstrap_interval(
    human: list[bool], judge: list[bool], resamples: int = 1000, min_n: int = 20, seed: int = 0
) -> tuple[float | None, float | None]:
    """(lo, hi) of a 95% percentile bootstrap of kappa; (None, None) with
    fewer than `min_n` labels, no resamples, or too few defined kappas."""
    n = len(human)
    if n < min_n or resamples <= 0:
        return None, None
    rng = random.Random(seed)
    values = []
    for _ in range(resamples):
        idx = [rng.randrange(n) for _ in range(n)]
        k = cohen_kappa([human[i] for i in idx], [judge[i] for i in idx])
        if k is not None:
            values.append(k)
    if len(values) < resamples // 2:
        return None, None
    values.sort()
    return values[int(0.025 * (len(values) - 1))], values[int(0.975 * (len(values) - 1))]


def summarise(human: list[bool], judge: list[bool], resamples: int = 1000, min_n: int = 20) -> dict:
    lo, hi = bootstrap_interval(human, judge, resamples, min_n)
    return {
        "n_labels": len(human),
        "agreement": observed_agreement(human, judge),
        "kappa": cohen_kappa(human, judge),
        "kappa_lo": lo,
        "kappa_hi": hi,
    }


def self_agreement(first: list[bool], second: list[bool]) -> float | None:
    """Share of labels the judge rated the same both times it was asked."""
    return observed_agreement(first, second)
