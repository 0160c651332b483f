"""Sentence-set candidates for near dedup: a copy with a sentence added.

A copy with a sentence added shares few character shingles with its
original when the sentence is long (Jaccard 0.5 for one as long as the
text): MinHash bands propose such a pair about half the time at that
Jaccard. But the copy holds every sentence of its original. So each task
is also put in buckets keyed by its set of sentences and, for a task of
2 to MAX_SENTENCES sentences, by that set less each one sentence in turn:
a copy with one sentence added (anywhere) less that sentence is its
original's set. The buckets are candidates only, judged like any other
edge (near._judge_edge, relation.contained for the containment link).
Keys are ordinary bucket keys under their own band index, so every path
(row, batch, in memory) pairs them as band buckets; pool rows carry their
saved bands only (an index built before this is reusable as it is).
"""

from __future__ import annotations

import hashlib
import re

import numpy as np

SENTENCE_BAND = -2  # band index of the sentence-set buckets (near.EXACT_BAND is -1)
MAX_SENTENCES = 12  # a longer task gets its full-set key only
WIDTH = 1 + MAX_SENTENCES  # keys per task in the batch path's matrix; -1 pads
_SPLIT = re.compile(r"(?<=[.?!])\s+")


def _h(s: str) -> int:
    return int.from_bytes(hashlib.blake2b(s.encode("utf-8"), digest_size=8).digest(), "little") >> 1


_MASK = (1 << 63) - 1
_BAND = ((SENTENCE_BAND + 2) * 0x9E3779B97F4A7C15) & _MASK  # near.bucket_key's band term


def sentence_keys(text: str) -> list[int]:
    """Bucket keys (near.bucket_key under SENTENCE_BAND) of a normalised
    text's sentence multiset and of that multiset less each sentence: the
    sum of the sentences' 63-bit hashes (order-free), less each one."""
    hs = [_h(s) for s in _SPLIT.split(text.strip()) if s]
    total = sum(hs)
    out = [(_BAND ^ (total & _MASK))]
    if 2 <= len(hs) <= MAX_SENTENCES:
        out += [(_BAND ^ ((total - h) & _MASK)) for h in hs]
    return list(dict.fromkeys(out))


def sentence_matrix(texts: list[str]) -> np.ndarray:
    """(n, WIDTH) int64 keys of each text, -1 where a text has fewer."""
    out = np.full((len(texts), WIDTH), -1, dtype=np.int64)
    for i, t in enumerate(texts):
        ks = sentence_keys(t)
        out[i, : len(ks)] = ks
    return out
