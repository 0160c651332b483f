"""Shingles, MinHash signatures and LSH band keys on numpy: Beam-free.

Used by near dedup, dedup against a reference pool, and the pool index.
Everything here is deterministic across processes and machines (no
Python `hash()`, fixed seeds), because band keys computed on different
workers, or months apart for a saved index, must agree.

Shingles are taken from the normalised text (`normalize.normalize_text`:
NFKC, case folded, whitespace runs to one space), so indentation and
spacing in code count as one space while its tokens still count.
- `char`: every `size`-character window. Works for any script (Chinese
  or Japanese text has no spaces to split words on) and degrades
  gracefully on short prompts: a changed number costs about `size`
  shingles, not `size` words' worth of a 30-word prompt.
- `word`: every `size`-word window of `\\w+` tokens (datatrove's choice
  for web pages).
A text shorter than one window is one shingle (the whole text), so empty
and one-word prompts get a signature and only ever match their equal.

MinHash uses multiply-shift hashing: h_i(x) = ((a_i * x + b_i) mod 2^64)
>> 32 for 32-bit shingle hashes x and random odd a_i. numpy's uint64
arithmetic wraps, which is exactly mod 2^64, so no big integers and no
Mersenne-prime modulo are needed. Measured against `datasketch` in
bench/dedup.py.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from tasksieve.transforms.dedup import kernels
from tasksieve.transforms.normalize import normalize_text

_WORD = re.compile(r"\w+")
_MUL, _BASE = kernels.MUL, kernels.BASE
# Shingles are processed in chunks of this many, so a huge prompt never
# builds a (num_perm x all-shingles) matrix: memory stays ~num_perm x 16 KiB.
_CHUNK = 2048


@dataclass(frozen=True)
class MinHashParams:
    shingle: str = "char"
    size: int = 5
    num_perm: int = 100
    bands: int = 20
    rows: int = 5
    seed: int = 1

    def __post_init__(self):
        if self.shingle not in ("char", "word"):
            raise ValueError(f"shingle must be 'char' or 'word', not {self.shingle!r}")
        if self.bands * self.rows > self.num_perm:
            raise ValueError(f"bands x rows ({self.bands} x {self.rows}) exceeds num_perm ({self.num_perm})")

    def as_dict(self) -> dict:
        return {
            "shingle": self.shingle,
            "size": self.size,
            "num_perm": self.num_perm,
            "bands": self.bands,
            "rows": self.rows,
            "seed": self.seed,
        }


def params_from_config(dedup) -> MinHashParams:
    """The MinHash parameters of a `schemas.config.DedupConfig`."""
    return MinHashParams(
        shingle=dedup.shingle,
        size=dedup.shingle_size,
        num_perm=dedup.num_perm,
        bands=dedup.bands,
        rows=dedup.rows,
        seed=dedup.seed,
    )


@lru_cache(maxsize=8)
def _perms(num_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.Generator(np.random.PCG64(seed))
    a = rng.integers(1, 2**63, size=num_perm, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    b = rng.integers(0, 2**63, size=num_perm, dtype=np.uint64)
    return a[:, None], b[:, None]


def _rolling(codes: np.ndarray, size: int) -> np.ndarray:
    """Polynomial hash of every `size`-long window of uint64 codes (wrapping)."""
    n = codes.shape[0] - size + 1
    h = np.zeros(n, dtype=np.uint64)
    for j in range(size):
        h = h * _BASE + codes[j : j + n]
    return h


def _to32(h: np.ndarray) -> np.ndarray:
    return np.unique((h * _MUL) >> np.uint64(32))


def shingle_hashes(normalised: str, shingle: str = "char", size: int = 5) -> np.ndarray:
    """Sorted unique 32-bit hashes (as uint64) of the text's shingles."""
    with np.errstate(over="ignore"):
        if shingle == "word":
            toks = _WORD.findall(normalised)
            if not toks:
                toks = [normalised]
            codes = np.fromiter((zlib.crc32(t.encode("utf-8")) for t in toks), dtype=np.uint64, count=len(toks))
        else:
            codes = np.frombuffer(normalised.encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
        if codes.shape[0] == 0:
            return np.zeros(1, dtype=np.uint64)  # the empty text: one fixed shingle
        if codes.shape[0] < size:
            size = codes.shape[0]  # shorter than a window: the whole text is one shingle
        return _to32(_rolling(codes + np.uint64(1), size))


def signature(hashes: np.ndarray, num_perm: int, seed: int) -> np.ndarray:
    """MinHash signature: num_perm uint32 minima."""
    a, b = _perms(num_perm, seed)
    sig = np.full(num_perm, np.iinfo(np.uint64).max, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for i in range(0, hashes.shape[0], _CHUNK):
            x = hashes[i : i + _CHUNK][None, :]
            np.minimum(sig, ((a * x + b) >> np.uint64(32)).min(axis=1), out=sig)
    return sig.astype(np.uint32)


def band_keys(sig: np.ndarray, bands: int, rows: int) -> list[tuple[int, int]]:
    """(band index, 63-bit key of that band's rows) for every band."""
    block = sig[: bands * rows].astype(np.uint64).reshape(bands, rows)
    with np.errstate(over="ignore"):
        h = np.zeros(bands, dtype=np.uint64)
        for r in range(rows):
            h = (h ^ block[:, r]) * _MUL
    h >>= np.uint64(1)
    return [(i, int(k)) for i, k in enumerate(h.tolist())]


def text_of(task: dict) -> str:
    """What near dedup compares: the normalised prompt."""
    return normalize_text(task.get("prompt") or "")


def task_bands(task: dict, p: MinHashParams) -> list[tuple[int, int]]:
    hashes = shingle_hashes(text_of(task), p.shingle, p.size)
    return band_keys(signature(hashes, p.num_perm, p.seed), p.bands, p.rows)


def jaccard(a: str, b: str, shingle: str = "char", size: int = 5) -> float:
    """Exact Jaccard similarity of two normalised texts' shingle sets."""
    return jaccard_of(shingle_hashes(a, shingle, size), shingle_hashes(b, shingle, size))


def jaccard_of(ha: np.ndarray, hb: np.ndarray) -> float:
    """`jaccard` of two texts from their shingle_hashes (made once per text
    where one text meets many)."""
    inter = np.intersect1d(ha, hb, assume_unique=True).shape[0]
    return inter / (ha.shape[0] + hb.shape[0] - inter)
