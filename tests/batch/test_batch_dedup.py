"""Issue 14: the batch engine of the cheap stages (transforms/batch/) makes
the decisions of the stage packages' Beam-free functions, row for row.

Here its kernels and units: each the same bits, edges or rows as the
one-task numpy code or plain function it replaces. End to end (`tasksieve
dedup` against tests/plain_stages.py, every column of the outputs) is
test_batch_decisions.py."""

import random
import sys
from pathlib import Path

import numpy as np
import pytest

from tasksieve.transforms.batch import chunks
from tasksieve.transforms.dedup import kernels
from tasksieve.transforms.batch import shards
from tasksieve.transforms.dedup import minhash as mh
from tasksieve.transforms.dedup.minhash import MinHashParams, task_bands, text_of
from tasksieve.transforms.dedup.near import bucket_key, bucket_pairs, exact_key
from tasksieve.transforms.dedup.signatures import jaccard_counts
from tasksieve.transforms.normalize import normalize_text

TASKSIEVE = [sys.executable, "-m", "tasksieve.pipeline.cli"]
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))


def _texts(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    words = "alpha beta gamma 12 delta 3.5 epsilon zeta 東京 x ( ) . , ½ Ⅻ ﬁ".split()
    return [" ".join(rng.choice(words) for _ in range(rng.randint(0, 90))) for _ in range(n)]


def test_batch_band_keys_equal_the_row_path():
    texts = _texts(0, 1500) + ["q" * 40_000 + " 7", "", "ab"]  # a huge prompt, the empty text, under one shingle
    for p in (MinHashParams(), MinHashParams(shingle="word", size=2, num_perm=64, bands=16, rows=4, seed=3)):
        tasks = [{"prompt": t} for t in texts]
        want = np.array([[bucket_key(b, k) for b, k in task_bands(t, p)] for t in tasks], dtype=np.int64)
        assert np.array_equal(shards.text_bands([text_of(t) for t in tasks], p), want)
    rng = random.Random(0)
    hashes = ["%032x" % rng.getrandbits(128) for _ in range(200)]
    assert shards.exact_keys(hashes).tolist() == [exact_key(h) for h in hashes]


def _kernel_windows(texts, p, table, first, mult):
    """kernels.window_hashes of `texts`: (each text's distinct hashes, as
    sorted uint64, and the distinct count the kernel's table gave)."""
    from tasksieve.transforms.dedup.signatures import _codes

    codes, offsets = _codes(texts, p)
    out = np.empty(offsets[-1] + len(texts), dtype=np.uint32)
    nwin, lens = np.empty(len(texts), dtype=np.int64), np.empty(len(texts), dtype=np.int64)
    kernels.get().window_hashes(
        codes, offsets, p.size, out, nwin, lens, *table[:2], first, mult, table[2], np.zeros((0, 128), dtype=np.uint8)
    )
    starts = offsets[:-1] + np.arange(len(texts))
    return [np.unique(out[s : s + n]).astype(np.uint64) for s, n in zip(starts, nwin)], lens.tolist()


def test_compiled_window_hashes_equal_numpy_shingle_sets():
    """The kernel's windows, made distinct, are shingle_hashes' set, and its
    table counts them right: for the empty text and texts under one
    window, with a table about half full (a text of ~2,000 distinct
    windows), with the stamps of an earlier call still in the table, and
    when every hash lands in one slot (a slot multiplier of 0, what a
    delivery written against a fixed multiplier would aim for)."""
    from tasksieve.transforms.dedup.signatures import _SLOT_MULT, _table

    assert kernels.get() is not None  # the pinned stack has numba; without it every path is the numpy one
    texts = [normalize_text(t) for t in _texts(1, 400)] + [
        "",
        "a",
        "ab",
        "𝔸𝔹ℂ 12 𝔸𝔹ℂ",
        "".join(map(chr, range(48, 2048))),
    ]
    for p in (MinHashParams(), MinHashParams(shingle="char", size=1), MinHashParams(shingle="word", size=2)):
        want = [mh.shingle_hashes(t, p.shingle, p.size) for t in texts]
        table = _table(texts)
        for first, mult in ((1, _SLOT_MULT), (len(texts) + 1, _SLOT_MULT), (1, np.uint64(0))):
            if mult == 0:
                table = _table(texts)
            got, lens = _kernel_windows(texts, p, table, first, mult)
            assert all(g.dtype == w.dtype and np.array_equal(g, w) for g, w in zip(got, want)), (p, first, mult)
            assert lens == [w.shape[0] for w in want], (p, first, mult)
        if p.shingle == "char":  # that text filled its table about half
            assert max(lens) > 1000 and table[0].shape[0] < 4 * max(lens)


def test_block_similarities_equal_the_one_pair_jaccard(monkeypatch):
    """_Shingles.sims (two compiled calls per block of edges) gives, bit for
    bit, the one-pair numpy Jaccard that judged every edge before; so does
    its numpy fallback. Pairs include the empty text, texts under one shingle, a
    text with itself, astral-plane characters and word shingles."""
    from tasksieve.transforms.dedup import near_judge as near

    texts = [normalize_text(t) for t in _texts(2, 300)] + ["", "a", "ab", "𝔸𝔹ℂ 12 𝔸𝔹ℂ", "q" * 5000]
    nodes = {f"n{i}": t for i, t in enumerate(texts)}
    rng = random.Random(3)
    edges = [(f"n{rng.randrange(len(texts))}", f"n{rng.randrange(len(texts))}") for _ in range(3000)]
    edges += [("n300", "n301"), ("n301", "n302"), ("n303", "n303"), ("n304", "n0")]
    # Sorted, as edge shards send them: a node in a run of edges, as the
    # first or the second end, with itself, then a text longer or shorter
    # than the one whose table is held.
    edges += sorted(edges) + [
        ("n5", "n6"),
        ("n5", "n304"),
        ("n7", "n5"),
        ("n5", "n5"),
        ("n300", "n5"),
        ("n304", "n8"),
        ("n9", "n304"),
        ("n304", "n300"),
    ]
    from tasksieve.transforms.dedup import signatures as sg

    monkeypatch.setattr(near, "_EDGE_BLOCK", 700)  # several blocks, nodes repeated across them
    monkeypatch.setattr(sg, "_TEXT_BATCH", 97)  # and several batches of texts within a block
    for p in (MinHashParams(), MinHashParams(shingle="char", size=1), MinHashParams(shingle="word", size=2)):
        sets = {n: mh.shingle_hashes(t, p.shingle, p.size) for n, t in nodes.items()}
        inter = [np.intersect1d(sets[a], sets[b], assume_unique=True).shape[0] for a, b in edges]
        want = [round(i / (sets[a].shape[0] + sets[b].shape[0] - i), 4) for i, (a, b) in zip(inter, edges)]
        got = near._Shingles(nodes, p).sims(edges)
        assert got == want, p
        monkeypatch.setattr(kernels, "enabled", False)
        assert near._Shingles(nodes, p).sims(edges) == want, p
        monkeypatch.setattr(kernels, "enabled", True)
    assert len(set(want)) > 20  # the pairs span many similarities, not one value


def test_signatures_and_sizes_are_the_one_text_signature_and_set_size(monkeypatch):
    """The batch path's signatures and shingle-set sizes, made in one pass
    (signatures.signatures_sizes_sketches; sizes_and_sketches for rows whose
    signatures are saved), are each text's numpy signature and
    distinct shingle count, compiled or not: the empty text, texts under one
    shingle, repeated shingles, astral-plane characters, a long text, and
    word shingles."""
    from tasksieve.transforms.dedup import signatures as sg

    texts = [normalize_text(t) for t in _texts(4, 200)] + ["", "a", "ab", "𝔸𝔹ℂ 12 𝔸𝔹ℂ", "q" * 5000, "ab ab ab ab ab ab"]
    for p in (MinHashParams(), MinHashParams(shingle="char", size=1), MinHashParams(shingle="word", size=2)):
        sets = [mh.shingle_hashes(t, p.shingle, p.size) for t in texts]
        want_sigs = np.array([mh.signature(h, p.num_perm, p.seed) for h in sets], dtype=np.uint32)
        want_sizes = [h.shape[0] for h in sets]
        assert len(set(want_sizes)) > 20
        for enabled in (True, False):
            monkeypatch.setattr(kernels, "enabled", enabled)
            sigs, sizes, _ = sg.signatures_sizes_sketches(texts, p)
            assert np.array_equal(sigs, want_sigs) and sizes.tolist() == want_sizes, (p, enabled)
            assert np.array_equal(sg.signatures(texts, p), want_sigs), (p, enabled)
            assert sg.sizes_and_sketches(texts, p)[0].tolist() == want_sizes, (p, enabled)
            keys, sizes, _ = shards.text_bands_sizes_sketches(texts, p)
            assert np.array_equal(keys, shards.text_bands(texts, p)) and sizes.tolist() == want_sizes


def test_the_size_bound_only_drops_edges_the_judgement_refuses():
    """dedup/near_rule.size_bound drops a candidate edge before its rows move;
    it must only ever drop edges whose rounded Jaccard is under the
    threshold. Pairs are built near the bound: a text and a copy with words
    added or cut (one shingle set nearly inside the other, the case where
    Jaccard meets min/max), at thresholds where rounding to 4 places
    matters; and the sizes the signatures' pass counts must be the sizes the
    judgement uses."""
    from tasksieve.transforms.dedup.near_rule import size_bound
    from tasksieve.transforms.dedup.signatures import signatures_sizes_sketches, sizes_and_sketches
    from tasksieve.transforms.same_problem.relation import jaccard_floor

    rng = random.Random(5)
    base = _texts(6, 300)
    texts = []
    for t in base:
        words = t.split()
        cut = words[: max(0, len(words) - rng.randint(0, max(1, len(words) // 3)))]
        texts += [t, " ".join(cut), t + " " + " ".join(rng.choice(words or ["w"]) for _ in range(rng.randint(0, 12)))]
    p = MinHashParams()
    ea = np.array([i for i in range(0, len(texts), 3) for _ in (1, 2)], dtype=np.int64)
    eb = np.array([i + d for i in range(0, len(texts), 3) for d in (1, 2)], dtype=np.int64)
    ea = np.concatenate([ea, rng.choices(range(len(texts)), k=2000)]).astype(np.int64)
    eb = np.concatenate([eb, rng.choices(range(len(texts)), k=2000)]).astype(np.int64)
    inter, lens = jaccard_counts(texts, ea, eb, p)
    assert signatures_sizes_sketches(texts, p)[1].tolist() == lens.tolist() == sizes_and_sketches(texts, p)[0].tolist()
    pruned = 0
    for threshold in (0.5, 0.7, 0.8, 0.85, 0.9, 0.95, 0.99, 1.0):
        for x, a, b in zip(inter.tolist(), ea.tolist(), eb.tolist()):
            s = round(x / (lens[a] + lens[b] - x), 4)
            if not size_bound(int(lens[a]), int(lens[b]), threshold):
                pruned += 1
                assert s < jaccard_floor(threshold), (threshold, texts[a][:40], texts[b][:40])
    assert pruned > 1000  # the bound drops many edges here, not none
    # A prefix's shingles are a subset of the text's, so its Jaccard *is*
    # min/max: the bound must then be exact, at every size ratio around
    # each threshold (text of distinct characters: L - 4 distinct shingles).
    for a in (7, 100, 1001):
        full = "".join(chr(0x4E00 + i) for i in range(a + 4))
        prefixes = [full[: b + 4] for b in range(1, a + 1)]
        inter, lens = jaccard_counts([full, *prefixes], np.zeros(a, dtype=np.int64), np.arange(1, a + 1), p)
        assert lens[0] == a and lens[1:].tolist() == list(range(1, a + 1))
        for threshold in (0.5, 0.7, 0.8, 0.85, 0.9, 0.999, 1.0):
            for b, x in zip(range(1, a + 1), inter.tolist()):
                s = round(x / (a + b - x), 4)
                # Exact at the lowest Jaccard a pair is judged at (a containment link's floor).
                assert size_bound(a, b, threshold) == (s >= jaccard_floor(threshold)), (a, b, threshold)


def test_shard_buckets_give_the_row_path_edges():
    rng = random.Random(1)
    keys = np.array([rng.randrange(50) for _ in range(400)], dtype=np.int64)
    nodes = np.array([f"s\x1fn{rng.randrange(300)}" for _ in range(400)], dtype=object)
    by_key = {}
    for k, n in zip(keys.tolist(), nodes.tolist()):
        by_key.setdefault(k, []).append(n)
    want = {e for members in by_key.values() for e in bucket_pairs(members, 8)}
    got = set()
    for ks, ns in shards.split_by_shard(keys, nodes, 7).values():
        order, starts, sizes = shards.bucket_runs(ks)
        assert (sizes > 1).all()  # only keys held by 2+ records
        got |= {e for s, n in zip(starts, sizes) for e in bucket_pairs(ns[order[s : s + n]].tolist(), 8)}
    assert got == want


def test_string_columns_give_back_each_string():
    """Bucket records carry their node strings as one str and where each
    ends (shards.StringColumn): every string must come back as it went in,
    through pickling and joining, whatever it holds (empty, astral, a lone
    surrogate, separators, newlines)."""
    from tasksieve.transforms.batch.shards import StringColumn

    rng = random.Random(5)
    alphabet = ["a", "\x1f", "\n", "", "東", "\U0001f600", "\ud800", "pool", ":", "\x00"]
    for trial in range(50):
        groups = [
            ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6))) for _ in range(rng.randint(0, 30))]
            for _ in range(rng.randint(1, 4))
        ]
        col = StringColumn.joined([chunks.unpack(chunks.pack(StringColumn.of(g))) for g in groups])
        flat = [x for g in groups for x in g]
        assert len(col) == len(flat)
        at = np.array([rng.randrange(len(flat)) for _ in range(40)] if flat else [], dtype=np.int64)
        assert col.take(at) == [flat[i] for i in at.tolist()], trial
        assert col.take(np.arange(len(flat))) == flat


def test_band_edges_are_the_dict_of_buckets_edges():
    """`tasksieve validate` finds the band buckets' candidates as arrays
    (batch/candidates.band_edges): they must be near.bucket_edges' (a dict of
    buckets, bucket_pairs of each), whatever the tasks are (templated texts
    sharing most buckets, buckets over max_pairs, a node given twice, empty
    and one-word prompts, `within` off)."""
    from tasksieve.transforms.batch.candidates import band_edges
    from tasksieve.transforms.dedup.minhash import MinHashParams, text_of
    from tasksieve.transforms.dedup.near import bucket_edges
    from tasksieve.transforms.dedup.near_judge import task_node

    rng = random.Random(11)
    sentences = [
        "Ann has 3 apples.",
        "Bob buys 4 more pens each day.",
        "How many are left?",
        "Total them up.",
        "A train leaves at noon.",
        "",
        "x",
        "Ünïcode  TEXT\twith\u00a0spaces.",
    ]
    params = (
        MinHashParams(),
        MinHashParams(shingle="word", size=2, num_perm=64, bands=16, rows=4, seed=3),
        MinHashParams(shingle="char", size=1),
    )
    seen_large = 0
    for trial in range(60):
        n = rng.randint(0, 120)
        tasks = [
            {
                "source": rng.choice(["s", "t"]),
                "task_id": f"id{rng.randrange(max(1, n))}",
                "prompt": " ".join(rng.choice(sentences) for _ in range(rng.randint(0, 4))),
            }
            for _ in range(n)
        ]
        p, max_pairs, within = rng.choice(params), rng.choice([2, 3, 8, 32]), rng.random() < 0.8
        assert band_edges(tasks, [], p, max_pairs, within) == bucket_edges(tasks, [], p, max_pairs, within), trial
        by_text: dict = {}
        for t in tasks:  # tasks of one text share every bucket
            by_text.setdefault(text_of(t), set()).add(task_node(t))
        seen_large += within and max(map(len, by_text.values()), default=0) > max_pairs
    assert seen_large > 10  # trials with buckets over max_pairs nodes: a star and a chain


def test_bucket_shard_edges_are_the_per_bucket_rule():
    """band_shard_found pairs the records of buckets as arrays: its edges must
    be, for every bucket, bucket_pairs less the pairs size_bound refuses,
    whatever the bucket holds (pool rows, which go first even where a task's
    name sorts before theirs, one node twice, sizes whose ratio rounds onto
    the threshold, `within` off, buckets over max_pairs), as node-id pairs, lower id
    first, in the edge shard of the lower id, naming the rows' holders."""
    from tasksieve.transforms.batch.dedup import POOL_SRC, NearSettings
    from tasksieve.transforms.batch.candidates import band_shard_found, edge_shards
    from tasksieve.transforms.dedup.near_rule import size_bound
    from tasksieve.transforms.batch.shards import StringColumn
    from tasksieve.transforms.dedup.minhash import MinHashParams

    rng = random.Random(7)
    # Size pairs whose ratio is on, just under or just over 0.8, within
    # 1e-4 of it (7999/10000 rounds under 0.8, 39999/50000 onto it), or 1/3
    # (a threshold of 1/3 is never met: round(1/3, 4) is under it).
    tricky = [
        (4, 5),
        (80, 100),
        (7999, 10000),
        (8001, 10000),
        (39999, 50000),
        (79995, 100000),
        (99, 125),
        (1, 3),
        (100, 300),
    ]
    for trial in range(200):
        n = rng.randint(2, 50)
        groups = [
            (rng.randrange(32), [f"s\x1f{i}" for i in range(0, n, 2)]),
            (rng.randrange(32), [f"a\x1f{i}" for i in range(1, n, 2)]),  # sorts before the pool rows
            (POOL_SRC + rng.randrange(3), [f"pool\x1fp\x1f{i}" for i in range(rng.randint(0, 15))]),
        ]
        pair = rng.choice(tricky)
        size_of = {x: rng.choice([*pair, *pair, rng.randint(1, 400)]) for _, names in groups for x in names}
        # A holder in the high bits, a position in the low: unique even when both task groups share a holder.
        id_of = {
            x: (src << 32) | int(x.rsplit("\x1f", 1)[1]) + 1000 * g
            for g, (src, names) in enumerate(groups)
            for x in names
        }
        name_of = {i: x for x, i in id_of.items()}
        threshold = rng.choice([0.8, 0.8, 0.8, 0.7999, 0.8001, 0.5, 1.0, 1 / 3])
        near = NearSettings(
            MinHashParams(),
            threshold,
            max_bucket_pairs=rng.choice([2, 3, 32]),
            within=rng.random() < 0.7,
            edge_shards=rng.choice([1, 3, 8, 32]),
        )
        parts, want = [], set()
        by_key: dict = {}
        for src, names in groups:
            if not names:
                continue
            m = rng.randint(1, 60)
            ns = [rng.choice(names) for _ in range(m)]
            ks = [rng.randrange(max(2, n // 2)) for _ in range(m)]
            for k, x in zip(ks, ns):
                by_key.setdefault(k, []).append(x)
            parts.append(
                chunks.pack(
                    (
                        np.array(ks, dtype=np.int64),
                        StringColumn.of(ns),
                        np.array([id_of[x] for x in ns], dtype=np.int64),
                        np.array([size_of[x] for x in ns], dtype=np.int64),
                    )
                )
            )
        for members in by_key.values():
            for a, b in bucket_pairs(members, near.max_pairs, near.within):
                if size_bound(size_of[a], size_of[b], threshold):
                    want.add((a, b))
        got = set()
        for shard, blob in band_shard_found((0, parts), near):
            pairs, meaning = chunks.unpack(blob)
            assert meaning == [] and pairs.dtype == np.int64
            assert (pairs[:, 0] < pairs[:, 1]).all() and (edge_shards(pairs[:, 0], near.edge_shards) == shard).all()
            got.update(tuple(sorted((name_of[a], name_of[b]))) for a, b in pairs.tolist())
        assert got == want, trial


def test_shards_grow_with_the_pool_unless_configured_or_against_a_pool():
    from tasksieve.transforms.batch.dedup import MIN_SHARDS, SHARD_TASKS, SHARDS, shard_count

    assert shard_count(0, None, False) == SHARDS  # inputs that could not be counted
    assert (
        shard_count(0, 0, False)
        == shard_count(0, 98, False)
        == shard_count(0, MIN_SHARDS * SHARD_TASKS, False)
        == MIN_SHARDS
    )
    assert shard_count(0, MIN_SHARDS * SHARD_TASKS + 1, False) == MIN_SHARDS + 1
    assert shard_count(0, SHARDS * SHARD_TASKS * 10, False) == SHARDS  # never more than SHARDS
    assert shard_count(0, 100, True) == SHARDS  # a reference pool's buckets share the bucket shards
    assert shard_count(5, None, True) == shard_count(5, 10**7, False) == 5  # `[dedup] shards` wins


def test_edge_shards_grow_with_the_pool_unless_configured():
    from tasksieve.transforms.batch.dedup import EDGE_TASKS, MIN_EDGE_SHARDS, SHARDS, edge_shard_count

    assert edge_shard_count(0, None) == SHARDS  # inputs that could not be counted
    assert edge_shard_count(0, 0) == edge_shard_count(0, 1000) == edge_shard_count(0, 8 * EDGE_TASKS) == MIN_EDGE_SHARDS
    assert edge_shard_count(0, 8 * EDGE_TASKS + 1) == 9
    assert edge_shard_count(0, 100 * EDGE_TASKS) == 100
    assert edge_shard_count(5, 100 * EDGE_TASKS) == edge_shard_count(5, None) == 5  # `[dedup] edge_shards` wins


def test_edge_shard_edges_in_node_order():
    """judge_shard turns id pairs into node edges: ranked in numpy with
    meaning edges (_node_edges), which must be near.sort_edges of the plain
    translation, and in id order without (_id_edges), which must hold the
    same edges; whatever the ids and however the names sort (pool rows,
    separators, digits)."""
    from tasksieve.transforms.batch.near import _id_edges, _node_edges
    from tasksieve.transforms.dedup.near import sort_edges

    rng = random.Random(11)
    for trial in range(100):
        names = list(
            {
                rng.choice(["pool\x1fp\x1f", "s\x1f", "\x1f3:a\x1fb\x1f", "b\x1f"]) + str(rng.randint(0, 999))
                for _ in range(rng.randint(2, 80))
            }
        )
        ids = rng.sample(range(1, 1 << 40), len(names))
        node_of = dict(zip(ids, names))
        m = rng.randint(0, 200)
        pairs = [tuple(rng.sample(ids, 2)) for _ in range(m)] if len(ids) > 1 else []
        pairs = list(dict.fromkeys(pairs))
        want = sort_edges(tuple(sorted((node_of[a], node_of[b]))) for a, b in pairs)
        arr = np.array(pairs, dtype=np.int64).reshape(-1, 2)
        assert _node_edges(arr, node_of) == want, trial
        # The edge shards' id order: the same edges, each node's in a run of the first index.
        in_ids, lo, hi = _id_edges(arr, node_of)
        assert sorted(tuple(sorted((in_ids[a], in_ids[b]))) for a, b in zip(lo.tolist(), hi.tolist())) == want
        assert (np.diff(lo) >= 0).all() and sorted(in_ids) == sorted(names), trial
    for edges in (_node_edges, _id_edges):  # an id without its row is an error, never a wrong name
        with pytest.raises(RuntimeError):
            edges(np.array([[1, 5]], dtype=np.int64), {1: "a", 2: "b"})


def test_repeated_ids_are_the_first_by_position_rule_on_id_records():
    """batch.repeated_ids sees only id records, never the tasks: for random
    id shards (ids repeated up to 5 times, across files, with separators
    that make two ids spell one string) the rows it names must be exactly
    the later rows of each (source, task_id) by validate.first_by_position,
    each sent to its own hash shard with the first row's file and line."""
    from tasksieve.transforms.batch.chunks import pack
    from tasksieve.transforms.batch.dedup import repeated_ids
    from tasksieve.transforms.batch.tags import IDS, REPEATS
    from tasksieve.transforms.validate import first_by_position

    rng = random.Random(7)
    for trial in range(200):
        records, tasks = [], []
        for ref in range(rng.randint(1, 60)):
            source, task_id = rng.choice(
                [("a", "b\x1fc"), ("a\x1fb", "c"), ("s", "1"), ("s", "2"), ("t", "1")] + [("u", str(ref))]
            )
            task = {
                "source": source,
                "task_id": task_id,
                "source_file": rng.choice(["/d/a.jsonl", "/d/b.jsonl"]),
                "line": rng.randint(1, 10_000),
                "ref": ref,
            }
            tasks.append(task)
            records.append(((source, task_id), task["source_file"], task["line"], rng.randrange(32), ref))
        parts = [records[i : i + 7] for i in range(0, len(records), 7)]
        got = {}
        for hs, (tag, found) in repeated_ids((3, [(IDS, pack(part)) for part in parts])):
            assert tag == REPEATS and found
            for ref, first_file, first_line in found:
                assert ref not in got and records[ref][3] == hs, trial
                got[ref] = (first_file, first_line)
        want, by_id = {}, {}
        for t in tasks:
            by_id.setdefault((t["source"], t["task_id"]), []).append(t)
        for group in by_id.values():
            first, rest = first_by_position(sorted(group, key=lambda t: t["ref"]))
            want.update({t["ref"]: (first["source_file"], first["line"]) for t in rest})
        assert got == want, trial
