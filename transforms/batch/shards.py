"""Columnar kernels of the batch dedup path (transforms/batch/dedup.py):
Beam-free (the signatures come from signatures.py).

Every function here computes, for a whole batch at once, exactly what the
Beam-free stage functions compute one task at a time (minhash.task_bands,
near.bucket_key, near.exact_key, near.bucket_pairs): the batch path must make
the same decisions, row for row, so nothing here is an approximation of
them, only a vectorisation. tests/batch/test_batch_dedup.py checks each
kernel against its row counterpart and the whole path end to end.
"""

from __future__ import annotations

import zlib

import numpy as np

from tasksieve.transforms.dedup.minhash import MinHashParams
from tasksieve.transforms.dedup.signatures import signatures_sizes_sketches
from tasksieve.transforms.dedup.near import EXACT_BAND

_MUL = np.uint64(0x9E3779B97F4A7C15)
_MASK63 = np.uint64(0x7FFFFFFFFFFFFFFF)


def shard_of(text: str, shards: int) -> int:
    """Deterministic shard of a string (crc32: the same on every worker and
    process, unlike Python's salted hash())."""
    return zlib.crc32(text.encode("utf-8")) % shards


def band_matrix(sigs: np.ndarray, p: MinHashParams) -> np.ndarray:
    """(n, bands) uint64 band keys, as minhash.band_keys per row."""
    n = sigs.shape[0]
    block = sigs[:, : p.bands * p.rows].astype(np.uint64).reshape(n, p.bands, p.rows)
    h = np.zeros((n, p.bands), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for r in range(p.rows):
            h = (h ^ block[:, :, r]) * _MUL
    return h >> np.uint64(1)


def bucket_keys(bands: np.ndarray) -> np.ndarray:
    """near.bucket_key for every (row, band): the band index mixed in with
    the same 64-bit multiply (only the low 63 bits are kept, so the
    wrapping product equals near.bucket_key's unbounded one)."""
    idx = np.arange(bands.shape[1], dtype=np.uint64) + np.uint64(2)
    with np.errstate(over="ignore"):
        mix = idx * _MUL
    return ((mix[None, :] ^ bands) & _MASK63).astype(np.int64)


def exact_keys(content_hashes: list[str]) -> np.ndarray:
    """near.exact_key for each content hash."""
    keys = np.array([int(h[:15], 16) for h in content_hashes], dtype=np.uint64)
    with np.errstate(over="ignore"):
        mix = np.uint64(EXACT_BAND + 2) * _MUL
    return ((mix ^ keys) & _MASK63).astype(np.int64)


def text_bands(texts: list[str], p: MinHashParams) -> np.ndarray:
    """(n, bands) int64 bucket keys of normalised texts."""
    return text_bands_sizes_sketches(texts, p)[0]


def text_bands_sizes_sketches(texts: list[str], p: MinHashParams) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(text_bands(texts), their shingle-set sizes, their sketches
    (sketch.py)) in one pass over each text's windows
    (signatures.signatures_sizes_sketches)."""
    sigs, sizes, sketches = signatures_sizes_sketches(texts, p)
    return bucket_keys(band_matrix(sigs, p)), sizes, sketches


def split_by_shard(keys: np.ndarray, nodes: np.ndarray, shards: int, *cols: np.ndarray):
    """{shard: (keys, nodes, *cols)} of flat bucket records (`cols`: more
    arrays parallel to `keys`), shard = key % shards: one record per shard
    per batch, instead of one per band per task."""
    shard = keys % shards
    order = np.argsort(shard, kind="stable")
    arrays = [a[order] for a in (keys, nodes, *cols)]
    cuts = np.flatnonzero(np.diff(shard[order])) + 1
    out = {}
    for parts in zip(*(np.split(a, cuts) for a in arrays)):
        if parts[0].shape[0]:
            out[int(parts[0][0] % shards)] = parts
    return out


def bucket_runs(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(order, starts, sizes): every bucket key held by 2+ records, found
    with one sort (only those buckets are looked at); bucket k's records
    are order[starts[k] : starts[k] + sizes[k]]."""
    if keys.shape[0] < 2:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    order = np.argsort(keys, kind="stable")
    ks = keys[order]
    starts = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]])
    size = np.r_[starts[1:], ks.shape[0]] - starts
    return order, starts[size > 1], size[size > 1]


class StringColumn:
    """Strings as one str and where each ends: two objects to pickle and
    load, not one per string. Bucket records carry a node string each (~14
    million at 1M tasks, most of them through the spill), and only the few
    in buckets too large to pair whole are read back (`take`)."""

    __slots__ = ("text", "ends")

    def __init__(self, text: str, ends: np.ndarray):
        self.text, self.ends = text, ends

    @classmethod
    def of(cls, strings: list[str]) -> "StringColumn":
        return cls("".join(strings), np.cumsum(np.fromiter(map(len, strings), dtype=np.int64, count=len(strings))))

    @classmethod
    def joined(cls, columns: list["StringColumn"]) -> "StringColumn":
        """One column of the strings of `columns`, in order."""
        shifts = np.cumsum([0] + [len(c.text) for c in columns[:-1]]).tolist()
        ends = [c.ends + shift for c, shift in zip(columns, shifts)]
        return cls("".join(c.text for c in columns), np.concatenate(ends) if ends else np.zeros(0, dtype=np.int64))

    def __reduce__(self):  # pickled as its two parts
        return StringColumn, (self.text, self.ends)

    def __len__(self) -> int:
        return self.ends.shape[0]

    def take(self, at: np.ndarray) -> list[str]:
        """The strings at positions `at`, in that order."""
        at = np.asarray(at, dtype=np.int64)
        ends = self.ends[at]
        starts = np.where(at > 0, self.ends[np.maximum(at - 1, 0)], 0)
        text = self.text
        return [text[a:b] for a, b in zip(starts.tolist(), ends.tolist())]
