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

import numpy as np

from tasksieve.transforms.same_problem.encoder_pass import (
    CNN_BRANCHES as _ORDERS,
    CNN_WIDTH as _CNN,
    EncoderPass,
    PieceRows,
    layernorm,
    padded,
    relu_residual,
)

HIGH_BAR, HIGH_MARGIN, LOW_MARGIN = 0.8, 0.35, 0.5


class BagOfPieces:
    """Bag-of-pieces vectors from the encoder's pass (encoder_pass.py): its
    weights, its tokenizer, its first layer of each piece (kept there for
    both) and its network after the mean. Like the pass, every product
    runs on a multiple of ROWS rows, so a piece's row and a text's vector
    do not depend on what else is computed with them."""

    def __init__(self, encoder: EncoderPass):
        self.p = encoder
        self.b = encoder.b
        # Each piece's row, made on first sight: a pool touches some
        # thousands of the 128,010 pieces.
        self.memo = PieceRows(self.b.table.shape[0], self.b.cnn_W.shape[1], self._piece_rows)

    def _piece_rows(self, ids: np.ndarray) -> np.ndarray:
        """Each piece's features as the encoder computes them for a piece
        with no neighbours (zero padding all round), projected (cnn_W)."""
        b, p, n = self.b, self.p, len(ids)
        rows = padded(n)
        feats = np.zeros((rows, p.emb_dim + len(_ORDERS) * _CNN), dtype=np.float32)
        p.embedded(ids, feats[:n, : p.emb_dim])
        x = np.zeros((rows, p.first_dim), dtype=np.float32)
        x[:n] = p.first_layer(ids)
        for i, (order, left) in enumerate(_ORDERS):
            xs = x[:, i * _CNN : (i + 1) * _CNN]
            # Only the window's own slot is non-zero: the rows of w1/w2 for it.
            h = relu_residual(xs @ b.w1[i].reshape(order, _CNN, _CNN)[left], b.b1[i], xs)
            c2 = relu_residual(h @ b.w2[i].reshape(order, _CNN, _CNN)[left], b.b2[i], h)
            off = p.emb_dim + i * _CNN
            feats[:, off : off + _CNN] = c2
        return (layernorm(feats, b.ln_g, b.ln_b, b.eps) @ b.cnn_W)[:n]

    def vectors(self, texts: list[str]) -> np.ndarray:
        """(len(texts), dim) unit vectors; texts as the encoder gets them."""
        seqs = [s or [0] for s in self.p.tok.encode(texts, out_type=int, add_bos=True, add_eos=True)]
        lens = np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))
        flat = np.fromiter((i for s in seqs for i in s), dtype=np.int64, count=int(lens.sum()))
        rows, slots = self.memo.slots(flat)
        out = np.zeros((len(seqs), self.b.d3.shape[1]), dtype=np.float32)
        if not len(seqs):
            return out
        # The sums as a sparse (texts x pieces) count matrix times the rows:
        # each text's sum on its own (no batch effect), nothing gathered.
        from scipy.sparse import csr_matrix

        indptr = np.concatenate([[0], np.cumsum(lens)])
        counts = csr_matrix((np.ones(len(flat), dtype=np.float32), slots, indptr), shape=(len(seqs), len(rows)))
        self.p.head_of_projected(np.asarray(counts @ rows, dtype=np.float32), lens, out)
        return out


def margin(bar: float) -> float:
    """How far below `bar` a bag cosine may be for the encoder's to reach it."""
    return HIGH_MARGIN if bar >= HIGH_BAR else LOW_MARGIN


def below(bag_cosine: float, bar: float) -> bool:
    """True: the encoder's cosine of this pair is taken as below `bar`."""
    return bag_cosine < bar - margin(bar)
