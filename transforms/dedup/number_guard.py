"""The number guard on arrays: which candidate pairs it refuses, for many
pairs at once.

The guard (near.number_overlap) refuses a pair that is similar but not
very similar when the two texts share too few of their numbers: one
template filled with other numbers. On a delivery made from templates
(generated tasks, one problem per set of numbers) almost every candidate
pair is such a sibling: a 100k-task delivery of one template gave 3.3
million candidate pairs, each refused by the guard, and the guard's two
Counters per pair (`&` and `|`, ~7 us) were 26 s of a 58 s run. Here each
text's distinct numbers are integer codes with their counts, and the
shared count of every pair is a few array operations, in slices of
bounded size.

Exactness: `shared_numbers` counts what `Counter(a) & Counter(b)` counts
(each distinct number a code with its count; a shared code adds the
smaller count), and the overlap is the same float division of two ints.
A pair is refused here only when that overlap is more than
near.FAR_UNDER under the minimum, so rounding it to 4 places (what the
guard compares) cannot bring it back over; the rest are judged one by
one, as before (tests/dedup/test_number_guard.py compares both).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Callable

import numpy as np

enabled = True  # false: every pair goes to the guard one by one (the tests compare both)
# The numbers the guard compares (near.number_overlap), and the same-problem
# rule for near-identical pairs (same_problem.rules._mostly_other_numbers).
NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_SLICE = 1 << 22  # pair x number entries looked up at once: ~100 MB of temporaries at most


def numbers_in(text: str) -> list[str]:
    return NUMBER.findall(text)


def number_codes(found: list[Counter]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each text's numbers (a Counter of numbers_in) as codes, CSR: text i
    holds the distinct codes codes[offsets[i]:offsets[i + 1]], sorted, and
    how many times each occurs (`times`, aligned with codes). Equal number
    strings share a code."""
    ids: dict = {}
    codes: list[int] = []
    times: list[int] = []
    offsets = np.zeros(len(found) + 1, dtype=np.int64)
    for i, counts in enumerate(found):
        mine = sorted((ids.setdefault(s, len(ids)), k) for s, k in counts.items())
        codes += [c for c, _ in mine]
        times += [k for _, k in mine]
        offsets[i + 1] = len(codes)
    return offsets, np.asarray(codes, dtype=np.int64), np.asarray(times, dtype=np.int64)


def shared_numbers(
    offsets: np.ndarray, codes: np.ndarray, times: np.ndarray, ea: np.ndarray, eb: np.ndarray
) -> np.ndarray:
    """For each pair k, how many numbers texts ea[k] and eb[k] share, as a
    multiset (sum((Counter(a) & Counter(b)).values())): over the distinct
    numbers of ea[k] found in eb[k], the smaller count. Like Counter's `&`,
    the work per pair is its distinct numbers, not every occurrence (a
    text may repeat one number a million times)."""
    out = np.zeros(ea.shape[0], dtype=np.int64)
    if not codes.size or not ea.size:
        return out
    width = int(codes.max()) + 1
    owner = np.repeat(np.arange(offsets.shape[0] - 1, dtype=np.int64), np.diff(offsets))
    keys = owner * width + codes  # sorted: by text, then code
    counts = offsets[ea + 1] - offsets[ea]
    ends = np.cumsum(counts)
    start = 0
    while start < ea.shape[0]:
        # Pairs whose look-ups fit in one slice (at least one pair).
        base = ends[start - 1] if start else 0
        stop = max(int(np.searchsorted(ends, base + _SLICE, side="right")), start + 1)
        n = counts[start:stop]
        pair = np.repeat(np.arange(stop - start), n)
        mine = np.repeat(offsets[ea[start:stop]] - (np.cumsum(n) - n), n) + np.arange(pair.shape[0])
        wanted = eb[start:stop][pair] * width + codes[mine]
        at = np.minimum(np.searchsorted(keys, wanted), keys.shape[0] - 1)
        both = np.where(keys[at] == wanted, np.minimum(times[mine], times[at]), 0)
        out[start:stop] = np.bincount(pair, weights=both, minlength=stop - start).astype(np.int64)
        start = stop
    return out


def refused_by_numbers(
    numbers_of: Callable[[int], Counter], ea: np.ndarray, eb: np.ndarray, min_numbers: float, margin: float
) -> np.ndarray:
    """Pairs (ea[k], eb[k]) of texts whose number overlap is under
    `min_numbers` by more than `margin`: what the guard refuses whatever
    the rounding. `numbers_of(i)`: a Counter of text i's numbers_in. A
    text without numbers overlaps fully (1.0)."""
    if not ea.size:
        return np.zeros(0, dtype=bool)
    used, where = np.unique(np.concatenate([ea, eb]), return_inverse=True)
    offsets, codes, times = number_codes([numbers_of(i) for i in used.tolist()])
    total = np.concatenate([[0], np.cumsum(times)])[offsets]  # numbers of each text, with repeats
    la, lb = where[: ea.shape[0]], where[ea.shape[0] :]
    na, nb = np.diff(total)[la], np.diff(total)[lb]
    inter = shared_numbers(offsets, codes, times, la, lb)
    both = (na > 0) & (nb > 0)
    overlap = np.ones(ea.shape[0])
    overlap[both] = inter[both] / (na[both] + nb[both] - inter[both])
    return both & (overlap < min_numbers - margin)
