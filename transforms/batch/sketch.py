"""Sketches: an upper bound on two texts' Jaccard similarity from 128 bytes
each, so an edge shard drops most candidate edges before their rows move
to it, and without making the two texts' windows or counting what they
share (batch/near.prune_shard).

Why: a pool's unrelated tasks share many character 5-grams (common words),
and 20 bands of 5 rows make a candidate of ~5% of the pairs at Jaccard 0.3.
Their number grows with the square of the pool: 0.85 candidates a task at
100k tasks, 2.8 at 1M, of which ~3.5% come within reach of the 0.7
threshold (bench/README.md, "Measured design choices"). Each cost its two rows'
trip to the edge shard (pickled, spilled past the memory budget, read
back), their texts' windows and a count of what they share.

What a sketch is: a text's distinct window hashes (the very 32-bit hashes
the Jaccard counts, signatures.jaccard_counts), counted per bucket of
their top 7 bits; each count stops at FULL. Every shared hash falls in the
same bucket of both texts, so for each bucket the shared ones are at most
the smaller count, and |A & B| <= U = the sum over buckets of the smaller
count, as long as no bucket is full in both (then the bound is not used).
The counts also add up to each set's size (or less, where a count
stopped), so

    J = |A & B| / (|A| + |B| - |A & B|) <= U / (sa + sb - U)

(the numerator is no smaller, the denominator no larger). An edge whose
bound is more than 1e-3 under the threshold (and whose rows are not
copies) is one near.judge_ranked and judge_edges refuse, so dropping it
first leaves the same confirmed edges and the same decisions
(tests/dedup/test_sketch.py, tests/batch/test_batch_dedup.py). Float division
rounds monotonically, so the bound computed in float64 is never under
the Jaccard computed in float64.

Buckets come from the hash's bits, which a delivery could aim at one
bucket: that only makes its bounds loose (more edges judged in full),
never wrong.
"""

from __future__ import annotations

import numpy as np

from tasksieve.transforms.dedup import kernels

BUCKETS = 1 << (32 - int(kernels.SKETCH_SHIFT))  # 128: one byte each, 128 bytes a text
FULL = int(kernels.SKETCH_FULL)
NO_SKETCHES = np.zeros((0, BUCKETS), dtype=np.uint8)  # what a caller passes for "count none"


def sketch_of_hashes(hashes: np.ndarray) -> np.ndarray:
    """The sketch of a text's distinct window hashes (minhash.shingle_hashes):
    what the kernels count as they make the windows."""
    counts = np.bincount(
        (hashes.astype(np.uint64) >> np.uint64(int(kernels.SKETCH_SHIFT))).astype(np.int64), minlength=BUCKETS
    )
    return np.minimum(counts, FULL).astype(np.uint8)


def shared_at_most(sketches: np.ndarray, ea: np.ndarray, eb: np.ndarray) -> np.ndarray:
    """U of each pair (ea[k], eb[k]) of rows of `sketches`: no fewer than the
    distinct hashes the two texts share, or -1 where no bound is known."""
    out = np.empty(ea.shape[0], dtype=np.int64)
    compiled = kernels.get()
    if compiled is not None:
        compiled.sketch_bounds(sketches, ea, eb, out)
        return out
    for i in range(0, ea.shape[0], 4096):  # blocks: (pairs x BUCKETS) temporaries stay small
        a, b = sketches[ea[i : i + 4096]], sketches[eb[i : i + 4096]]
        low = np.minimum(a, b)
        out[i : i + 4096] = np.where((low == FULL).any(axis=1), -1, low.sum(axis=1, dtype=np.int64))
    return out


def could_reach(sketches: np.ndarray, ea: np.ndarray, eb: np.ndarray, floor: float) -> np.ndarray:
    """Whether the Jaccard of each pair (ea[k], eb[k]) of texts could be
    `floor` or more, by their sketches: False only where it surely cannot."""
    shared = shared_at_most(sketches, ea, eb)
    sizes = sketches.sum(axis=1, dtype=np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        bound = shared / (sizes[ea] + sizes[eb] - shared)
    # NaN (no windows counted: never from the kernels) compares false: kept.
    return ~((shared >= 0) & (bound < floor))
