"""Issue 14: the sketch bound (transforms/batch/sketch.py) drops a
candidate edge before its rows move only where the exact Jaccard is
surely under the line judge_ranked draws, so the batch path confirms the
same edges and keeps the same decisions. The sketch every producer makes
(the signature kernel, the window kernel, the numpy fallback, the build
made ahead of time) is the same bytes."""

import random

import numpy as np
import pytest

from tasksieve.transforms.dedup import kernels

from tasksieve.transforms.batch import sketch
from tasksieve.transforms.dedup import minhash as mh
from tasksieve.transforms.dedup import near_judge as near_mod
from tasksieve.transforms.dedup import signatures as sg
from tasksieve.transforms.dedup.minhash import MinHashParams
from tasksieve.transforms.normalize import normalize_text

P = MinHashParams()


def _texts(seed: int) -> list[str]:
    """Unrelated texts from one vocabulary (many shared 5-grams: the
    candidates the bound is for), copies with edits at every rate, texts
    long enough to fill buckets, and the texts under one window."""
    rng = random.Random(seed)
    words = "the train leaves at noon and a bus at 9 find the total cost of 12 apples each 3 dollars 東京 𝔸𝔹ℂ".split()
    base = [" ".join(rng.choice(words) for _ in range(rng.randint(3, 60))) for _ in range(120)]
    edited = []
    for b in base[:60]:
        w = b.split()
        for rate in (0.05, 0.2, 0.4):
            edited.append(" ".join(rng.choice(words) if rng.random() < rate else x for x in w))
    noise = "".join(chr(rng.randrange(0x4E00, 0x9FFF)) for _ in range(60_000))  # ~470 distinct windows a bucket
    long = [noise, noise[:-300] + "x" * 300, noise[20_000:], "q" * 40_000]
    return [normalize_text(t) for t in base + edited] + long + ["", "a", "ab", "ab ab ab ab ab ab"]


def _pairs(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = random.Random(seed)
    pairs = [(rng.randrange(n), rng.randrange(n)) for _ in range(4000)]
    pairs += [(i, 120 + 3 * i + k) for i in range(60) for k in range(3)]  # each text with its edits
    pairs += [(n - 8, n - 7), (n - 8, n - 6), (n - 8, n - 8), (n - 4, n - 3), (n - 1, n - 1), (0, n - 4)]
    return tuple(np.array(x, dtype=np.int64) for x in zip(*pairs))


def _jaccard(texts, ea, eb, p=P):
    inter, lens = sg.jaccard_counts(texts, ea, eb, p)
    return inter, lens, inter / (lens[ea] + lens[eb] - inter)


@pytest.mark.parametrize("compiled", [True, False])
def test_every_producer_makes_the_sketch_of_the_distinct_window_hashes(monkeypatch, compiled):
    """The signature kernel's, the window kernel's and the numpy fallback's
    sketches are each text's distinct shingle hashes counted per bucket of
    their top 7 bits, each count stopping at 255 (the long texts fill
    buckets), for char and word shingles."""
    monkeypatch.setattr(kernels, "enabled", compiled)
    texts = _texts(1)
    for p in (P, MinHashParams(shingle="char", size=1), MinHashParams(shingle="word", size=2)):
        sets = [mh.shingle_hashes(t, p.shingle, p.size) for t in texts]
        want = np.zeros((len(texts), sketch.BUCKETS), dtype=np.int64)
        for i, h in enumerate(sets):
            np.add.at(want[i], (h >> np.uint64(25)).astype(np.int64), 1)
        want = np.minimum(want, 255).astype(np.uint8)
        _, sizes, got = sg.signatures_sizes_sketches(texts, p)
        assert got.dtype == np.uint8 and np.array_equal(got, want), p
        sizes2, got2 = sg.sizes_and_sketches(texts, p)
        assert np.array_equal(got2, want) and np.array_equal(sizes, sizes2), p
        unfilled = (want < 255).all(axis=1)
        # Where no count stopped, the counts add up to the set size the Jaccard uses.
        assert np.array_equal(want[unfilled].sum(axis=1), sizes[unfilled]), p
        if p == P:
            assert (~unfilled).sum() >= 3  # the long texts did fill buckets


@pytest.mark.parametrize("compiled", [True, False])
def test_the_bound_is_never_under_the_jaccard(monkeypatch, compiled):
    """For every pair (unrelated, edited copies, a text and itself, texts
    whose buckets are full): the shared count bound is at least the exact
    intersection, or -1 (unknown); and could_reach is true at a floor equal
    to the pair's own float Jaccard, the tightest floor there is."""
    monkeypatch.setattr(kernels, "enabled", compiled)
    texts = _texts(2)
    ea, eb = _pairs(len(texts), 3)
    _, _, sketches = sg.signatures_sizes_sketches(texts, P)
    inter, lens, jac = _jaccard(texts, ea, eb)
    shared = sketch.shared_at_most(sketches, ea, eb)
    assert ((shared >= inter) | (shared == -1)).all()
    assert all(sketch.could_reach(sketches, ea[k : k + 1], eb[k : k + 1], jac[k])[0] for k in range(ea.shape[0]))
    # Not vacuous: the bound refuses most unrelated pairs at 0.7, keeps some
    # pairs that reach it, and knows no bound where both texts fill a bucket.
    reach = sketch.could_reach(sketches, ea, eb, 0.7 - 1e-3)
    assert (jac >= 0.7).sum() > 50 and (~reach).mean() > 0.5
    both_full = [k for k in range(ea.shape[0]) if ((sketches[ea[k]] == 255) & (sketches[eb[k]] == 255)).any()]
    assert both_full and (shared[both_full] == -1).all()


def test_full_buckets_are_never_taken_for_counts(monkeypatch):
    """A count that stopped at 255 may stand for more: where both texts' are
    full the shared count is unknown, where one's is, the other's count
    bounds that bucket."""
    a = np.full((1, sketch.BUCKETS), 2, dtype=np.uint8)
    full = a.copy()
    full[0, 5] = 255
    other = a.copy()
    other[0, 5] = 9
    sk = np.concatenate([a, full, other])
    ea, eb = np.array([0, 1, 1, 2], dtype=np.int64), np.array([1, 1, 2, 1], dtype=np.int64)
    for enabled in (True, False):
        monkeypatch.setattr(kernels, "enabled", enabled)
        assert sketch.shared_at_most(sk, ea, eb).tolist() == [2 * 128, -1, 2 * 127 + 9, 2 * 127 + 9]
    # Both full: kept at any floor, however small the other counts make the bound look.
    assert sketch.could_reach(sk, np.array([1], dtype=np.int64), np.array([1], dtype=np.int64), 0.99)[0]


def test_pruned_edge_shards_confirm_the_same_edges_and_count_fewer(monkeypatch):
    """An edge shard pruned by the sketches (batch/near.prune_shard) keeps
    every edge judge_ranked confirms, at thresholds around the pairs'
    similarities, so judging what it keeps confirms the same edges in the
    same order while counting the shingles of fewer pairs; an alias (one
    content hash on two unlike texts) stays as a copy; meaning edges all
    stay; and each holder is asked for exactly the rows the kept edges name."""
    from tasksieve.transforms.batch.chunks import pack, unpack
    from tasksieve.transforms.batch.dedup import NearSettings, holder_of, position_of
    from tasksieve.transforms.batch.near import prune_shard
    from tasksieve.transforms.batch.tags import EDGES, NEEDS, SKETCHED
    from tasksieve.transforms.dedup.near_judge import Component, judge_ranked
    from tasksieve.transforms.batch.shards import exact_keys
    from tasksieve.transforms.normalize import hashed_with_text
    from tasksieve.transforms.same_problem.rules import Rules

    with_hash = lambda t: hashed_with_text(t)[0]  # noqa: E731
    texts = _texts(4)[:300]
    tasks = [
        with_hash({"task_id": f"t{i}", "source": "s", "prompt": t or "x", "answer": str(i % 4), "domain": "math"})
        for i, t in enumerate(texts)
    ]
    tasks.append(
        dict(
            with_hash({"task_id": "alias", "source": "s", "prompt": "zq xv", "answer": "1", "domain": "math"}),
            content_hash=tasks[0]["content_hash"],
        )
    )
    c = Component(tasks, [], P)
    names = sorted(c.texts)
    by_node = {f"s\x1f{t['task_id']}": t for t in tasks}
    ids = np.array([(i % 3) << 32 | i for i in range(len(names))], dtype=np.int64)  # three holders
    ea, eb = _pairs(len(names), 5)
    alias = (names.index("s\x1ft0"), names.index("s\x1falias"))
    ea, eb = np.append(ea, alias[0]), np.append(eb, alias[1])
    keep = ea != eb
    ea, eb = ea[keep], eb[keep]
    pairs = np.unique(np.sort(np.stack([ids[ea], ids[eb]], axis=1), axis=1), axis=0)
    meaning = [(int(ids[7]), int(ids[8]), 0.95)]
    sketches = sg.signatures_sizes_sketches([c.texts[n] for n in names], P)[2]
    codes = exact_keys([by_node[n]["content_hash"] for n in names])
    index = {int(x): k for k, x in enumerate(ids)}
    counted = []
    real = near_mod.jaccard_counts
    monkeypatch.setattr(near_mod, "jaccard_counts", lambda t, a, b, p: counted.append(a.shape[0]) or real(t, a, b, p))
    sims = _jaccard([c.texts[n] for n in names], ea, eb)[2]
    for threshold in [0.5, 0.7, 0.9, *random.Random(6).sample(sorted(set(sims[sims > 0.3].tolist())), 4)]:
        sent = [(EDGES, pack((pairs, meaning)))]
        for h in range(3):  # each holder's rows, in its own order
            mine = np.flatnonzero(holder_of(ids) == h)[::-1]
            sent.append((SKETCHED, pack((ids[mine], sketches[mine], codes[mine]))))
        out = list(prune_shard((4, sent), NearSettings(P, threshold)))
        ((kept, kept_meaning),) = [unpack(v) for k, (tag, v) in out if tag == EDGES]
        asked = {k: unpack(v) for k, (tag, v) in out if tag == NEEDS}
        assert kept_meaning == meaning and kept.shape[0] < pairs.shape[0]
        named = np.unique(np.concatenate([kept.reshape(-1), ids[[7, 8]]]))
        assert {h: (shard, pos.tolist()) for h, (shard, pos) in asked.items()} == {
            h: (4, position_of(named[holder_of(named) == h]).tolist()) for h in range(3)
        }
        lo, hi = (np.array([index[int(x)] for x in col], dtype=np.int64) for col in (pairs[:, 0], pairs[:, 1]))
        counted.clear()
        want = judge_ranked(c, names, lo, hi, threshold, 0.5, 0.9, Rules())
        plain = sum(counted)
        lo, hi = (np.array([index[int(x)] for x in col], dtype=np.int64) for col in (kept[:, 0], kept[:, 1]))
        counted.clear()
        got = judge_ranked(c, names, lo, hi, threshold, 0.5, 0.9, Rules())
        assert got == want and want, threshold
        assert sum(counted) < plain, threshold
        assert any(e == tuple(sorted(("s\x1ft0", "s\x1falias"))) for e, _, _ in got)
