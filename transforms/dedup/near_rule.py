"""The near-duplicate rule, in one place: when two texts are near
duplicates, with every bound the rule needs. The Beam-free stage
(near.py with near_judge.py, `tasksieve validate`'s) and the batch engine
(transforms/batch/near.py) call these; a change to the rule is made here
only, and the batch-vs-reference tests (tests/batch/,
tests/dedup/test_number_guard.py) must stay green after it.

The rule: a candidate pair is a duplicate when its shingle Jaccard
similarity, rounded to 4 places (`similarity`), is at least `threshold`,
and, when it is under `guard_below`, the two texts also share at least
`min_numbers` of their numbers (`number_overlap`). An exact copy (same
content hash) always is.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from tasksieve.transforms.dedup.number_guard import numbers_in
from tasksieve.transforms.same_problem.relation import jaccard_floor


def number_overlap(a: str, b: str) -> float:
    """Multiset Jaccard of the numbers in two texts (1.0 if either has none).

    Why: "Calculate 1 + 8." and "Calculate 1 + 9." are 71% similar as
    5-character shingles, yet they are two problems from one template:
    in a short prompt the numbers *are* the problem. So a pair that is
    similar but not very similar (below `number_guard_below`) must also
    share most of its numbers; a GSM8K-length problem with one number
    edited stays ~96% similar and is caught whatever its numbers."""
    return counts_overlap(Counter(numbers_in(a)), Counter(numbers_in(b)))


def counts_overlap(na: Counter, nb: Counter) -> float:
    """number_overlap of two texts' number counts."""
    if not na or not nb:
        return 1.0
    return round(sum((na & nb).values()) / sum((na | nb).values()), 4)


def similarity(inter: int, size_a: int, size_b: int) -> float:
    """The shingle Jaccard of two sets of these sizes sharing `inter`,
    rounded to 4 places: what every threshold is compared with."""
    return round(inter / (size_a + size_b - inter), 4)


def confirmed(s: float, numbers: float, threshold: float, min_numbers: float, guard_below: float) -> bool:
    """A candidate pair with similarity `s` and number overlap `numbers` is a duplicate."""
    return s >= threshold and (s >= guard_below or numbers >= min_numbers)


# A Jaccard this far under the threshold rounds (to 4 places) under it
# whatever the float error: round() moves a value by at most 0.00005.
FAR_UNDER = 1e-3


def size_bound(a: int, b: int, threshold: float) -> bool:
    """Can two texts with a and b distinct shingles be confirmed by their
    shingles at all? Their Jaccard is at most min/max (all of the smaller
    set shared), and rounding to 4 places is monotone, so an edge with
    round(min/max, 4) under the threshold is refused by judge_edges whatever
    its texts say. Edges with equal content hashes (confirmed outright)
    have equal texts, so equal sizes; meaning edges never pass here. The
    bound is relation.jaccard_floor: the lowest Jaccard a containment link
    (a sentence added) is judged at, the same for both paths."""
    return round(min(a, b) / max(a, b), 4) >= jaccard_floor(threshold)


def size_bound_mask(small: np.ndarray, large: np.ndarray, threshold: float) -> np.ndarray:
    """size_bound for arrays of set sizes, exactly: round(x, 4) is within
    0.5e-4 (and an ulp) of x, so a ratio 1e-4 or more clear of the threshold
    is decided by the comparison alone; only the few closer ones go through
    size_bound itself."""
    ratio, floor = small / large, jaccard_floor(threshold)
    keep = ratio >= floor + 1e-4
    near = np.flatnonzero(~keep & (ratio >= floor - 1e-4))
    for i in near.tolist():
        keep[i] = size_bound(int(small[i]), int(large[i]), threshold)
    return keep


def near_options(dedup, decontam) -> dict:
    """The near-dedup settings from the run config's `[dedup]` section (the
    same-problem rules read `[decontam]` too), as keyword arguments of both
    near stages (near.find_near_duplicates, transforms/batch/dedup.NearSettings),
    after their MinHash parameters and threshold: the one mapping of the
    config to the rule."""
    from tasksieve.transforms.same_problem.rules import rules_from_config

    return {
        "max_bucket_pairs": dedup.max_bucket_pairs,
        "within": dedup.near,
        "min_numbers": dedup.number_overlap,
        "guard_below": dedup.number_guard_below,
        "semantic": dedup.semantic,
        "rules": rules_from_config(decontam, dedup),
        "keep_variants": dedup.keep_variants,
    }
