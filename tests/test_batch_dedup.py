"""Issue 14: the batch path of the cheap stages (transforms/batch/stages.py,
the default; `[dedup] batch = false` is the row-at-a-time reference path)
makes the reference path's decisions, row for row.

Kernels first (the same bits as the numpy code they replace), then
`tasksieve dedup` end to end on both paths, comparing every column of
results.parquet and quarantine.parquet except the run id: on the bundled
sample, a 5,000-task bench pool (planted copies of five kinds, shared
sentences and templates), the same against a reference pool, the
same-problem hard cases with the meaning stage on, the 1,000-row hostile
corpus, and on the DaskRunner."""

import dataclasses
import hashlib
import hmac
import json
import os
import pickle
import random
import re
import stat
import subprocess
import sys
import unicodedata
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from tasksieve.schemas.config import DedupConfig
from tasksieve.transforms.batch import chunks
from tasksieve.transforms.dedup import kernels
from tasksieve.transforms.batch import shards
from tasksieve.transforms.dedup import minhash as mh
from tasksieve.transforms.dedup.minhash import MinHashParams, task_bands, text_of
from tasksieve.transforms.dedup.near import bucket_key, bucket_pairs, exact_key
from tasksieve.transforms.dedup.near_rule import similarity
from tasksieve.transforms.dedup.signatures import jaccard_counts
from tasksieve.transforms.normalize import normalize_text

TASKSIEVE = [sys.executable, "-m", "tasksieve.pipeline.cli"]
ROOT = Path(__file__).resolve().parent.parent
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
    from tasksieve.transforms.dedup.signatures import jaccard_counts, signatures_sizes_sketches, sizes_and_sketches

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
                assert s < threshold, (threshold, texts[a][:40], texts[b][:40])
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
                assert size_bound(a, b, threshold) == (s >= threshold), (a, b, threshold)


_WS, _BEFORE, _AFTER = re.compile(r"\s+"), re.compile(r"\s+([.,;:!?%)\]}])"), re.compile(r"([(\[{])\s+")


def _regex_normal_form(text):
    """normalize_text as it was written before issue 14; content hashes saved
    in reference-pool indexes depend on the two agreeing exactly."""
    if not text:
        return ""
    t = _WS.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()
    return _AFTER.sub(r"\1", _BEFORE.sub(r"\1", t))


def test_whitespace_is_unprintable_but_the_space():
    # normalize_text's single-spaced shortcut rests on this.
    assert [c for c in range(sys.maxunicode + 1) if chr(c).isspace() and chr(c).isprintable()] == [32]


def test_normalize_text_equals_its_regex_form_on_hostile_text():
    spaces = [chr(c) for c in range(0x3000 + 1) if chr(c).isspace()] + ["\u200b", "\ufeff", "\u2028", "\u3000"]
    alphabet = list("ab1 .,;:!?%)]}([{") + spaces + ["ﬁ", "Ⅻ", "ß", "İ", "（", "）", "．", "︵", "\u0345", "Σ", "¼"]
    rng = random.Random(7)
    for _ in range(40_000):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 24)))
        assert normalize_text(s) == _regex_normal_form(s), repr(s)


def test_spilled_chunks_round_trip_and_a_planted_file_is_refused(tmp_path):
    with chunks.spill_folder(str(tmp_path)) as spill:
        assert stat.S_IMODE(os.stat(spill.folder).st_mode) == 0o700  # private to the user running it
        rows = [{"task_id": "t1", "prompt": "p"}, {"task_id": "t2", "prompt": "q"}]
        n, packed = chunks.as_chunk(rows, spill)
        assert n == 2 and chunks.rows_of((n, packed)) == rows
        second = chunks.pack(["another"], spill)
        path, offset, _ = packed
        assert second[0] == path and second[1] > offset  # one appended file per writing thread
        assert chunks.unpack(second) == ["another"] and chunks.rows_of((n, packed)) == rows
        data = Path(path).read_bytes()
        # The format: blob length, HMAC-SHA256 of "file:offset:" + blob under the run's key, blob.
        blob = data[second[1] + 40 :]
        assert data[second[1] : second[1] + 8] == len(blob).to_bytes(8, "little")
        where = f"{os.path.basename(path)}:{second[1]}:".encode()
        assert data[second[1] + 8 : second[1] + 40] == hmac.new(spill.key, where + blob, hashlib.sha256).digest()
        Path(path).write_bytes(data[second[1] :] + data)  # the second blob copied to offset 0
        with pytest.raises(chunks.SpillTampered):  # its HMAC names the offset it was written at
            chunks.unpack((path, 0, spill))
        Path(path).write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # one bit of the second blob changed
        with pytest.raises(chunks.SpillTampered):
            chunks.unpack(second)
        assert chunks.rows_of((n, packed)) == rows  # the first blob is untouched
        for at in (len(data), len(data) + 7, 3):  # past the end, a torn header, inside a blob
            with pytest.raises(chunks.SpillTampered):
                chunks.unpack((path, at, spill))
        planted = Path(spill.folder) / "planted.pkl"  # a pickle that would run code
        body = b"cos\nsystem\n(S'touch /tmp/pwned'\ntR."
        planted.write_bytes(len(body).to_bytes(8, "little") + b"\0" * 32 + body)
        with pytest.raises(chunks.SpillTampered):
            chunks.unpack((str(planted), 0, spill))
        with pytest.raises(FileExistsError):  # a file name is never reused
            open(path, "xb")
    assert not Path(spill.folder).exists()
    assert chunks.rows_of(chunks.as_chunk(rows)) == rows  # no spill: bytes in memory


def test_held_values_are_the_objects_handed_out_once_within_the_budget(tmp_path):
    rows = [{"task_id": f"t{i}", "prompt": "p" * 10} for i in range(10)]
    budget = 15 * chunks.ROW_BYTES
    with chunks.spill_folder(str(tmp_path), memory_bytes=budget) as spill:
        n, held = chunks.as_chunk(rows, spill)
        assert isinstance(held, chunks.Held)
        # Over the budget with the first still held: pickled to the spill file.
        spilled = chunks.pack(rows[:6], spill)
        assert isinstance(spilled, tuple) and spilled[2] is spill
        assert chunks.rows_of((n, held)) is rows  # the object itself: nothing pickled
        with pytest.raises(RuntimeError, match="read twice"):  # taken by the first read
            chunks.rows_of((n, held))
        again = chunks.pack(rows[:6], spill)  # the budget is free again
        assert isinstance(again, chunks.Held)
        # Beam's coders pickle the handle between stages: it still finds its value.
        assert chunks.unpack(pickle.loads(pickle.dumps(again))) == rows[:6]
        assert chunks.unpack(spilled) == rows[:6]
        # A chunk passed on unchanged after it was read: held anew, or the same file blob.
        n, held = chunks.as_chunk(rows, spill)
        passed = chunks.unchanged((n, held), chunks.rows_of((n, held)), spill)
        assert chunks.rows_of(passed) is rows
        n, blob = chunks.as_chunk(rows, dataclasses.replace(spill, memory_bytes=0))
        assert chunks.unchanged((n, blob), chunks.rows_of((n, blob)), spill) == (n, blob)
        # Arrays (cheap to pickle) take at most half the budget; rows the whole.
        array = np.zeros(budget * 6 // 10 // 8, dtype=np.int64)
        assert isinstance(chunks.pack((array, array[:1]), spill), tuple)
        as_rows = chunks.pack(rows[:9], spill)
        assert isinstance(as_rows, chunks.Held)
        chunks.unpack(as_rows)
        small = chunks.pack(array[: budget // 4 // 8], spill)
        assert isinstance(small, chunks.Held) and chunks.unpack(small).shape == (budget // 4 // 8,)
        left = chunks.pack(["still held"], spill)
    with pytest.raises(RuntimeError):  # the run's table went with its folder
        chunks.unpack(left)


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
    from tasksieve.transforms.dedup.near import bucket_edges, task_node

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


def _run(inputs, out, cfg_text, tmp, *extra):
    cfg = tmp / f"{out.name}.toml"
    cfg.write_text(cfg_text)
    proc = subprocess.run(
        [
            *TASKSIEVE,
            "dedup",
            *sum((["--input", str(i)] for i in inputs), []),
            "--out",
            str(out),
            "--config",
            str(cfg),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _table(out, name):
    t = pq.read_table(out / f"{name}.parquet")
    return t.drop_columns([c for c in ("run_id",) if c in t.column_names]).to_pylist()


def _compare(inputs, tmp, cfg_text, *extra, batch_extra=(), memory_mib=None):
    """Both paths on the same inputs; every column but the run id must agree.
    `memory_mib`: the batch path's budget for values held as objects (None:
    the default, which holds every value of these small inputs; 0: every
    value spilled to disk; 1: some held, most spilled)."""
    ref, bat = tmp / "ref", tmp / "batch"
    _run(inputs, ref, cfg_text.replace("[dedup]", "[dedup]\nbatch = false"), tmp, *extra)
    held = "" if memory_mib is None else f"\nmemory_mib = {memory_mib}"
    proc = _run(inputs, bat, cfg_text.replace("[dedup]", "[dedup]\nbatch = true" + held), tmp, *extra, *batch_extra)
    a, b = _table(ref, "results"), _table(bat, "results")
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x == y, (x.get("task_id"), {k: (x[k], y[k]) for k in x if x[k] != y[k]})
    assert _table(ref, "quarantine") == _table(bat, "quarantine")
    assert _table(ref, "costs") == _table(bat, "costs")
    return a, proc


@pytest.mark.slow
def test_batch_path_same_decisions_on_the_bundled_sample(sample_dir, tmp_path):
    rows, proc = _compare([sample_dir], tmp_path, "[dedup]\n")
    assert sum(r["status"] == "dropped" for r in rows) == 15
    assert "row accounting" in proc.stdout and "OK" in proc.stdout
    assert "rows/s" in proc.stderr  # the progress lines
    assert "near dedup: edge shards judged (done)" in proc.stderr  # the steps between reading and kept rows
    assert "hash shards (done): 8 shards" in proc.stderr  # 98 rows: the fewest id, hash and bucket shards


@pytest.fixture(scope="module")
def bench_pool(tmp_path_factory):
    from dedup import make_pool

    folder = tmp_path_factory.mktemp("pool")
    make_pool(5000, folder, seed=3)
    return folder


@pytest.mark.slow
def test_batch_path_same_decisions_on_a_5000_task_pool(bench_pool, tmp_path):
    # The meaning stage is off here (embedding 5,000 prompts is the slow part);
    # the sample and the hard cases run it. 32 id, hash and bucket shards,
    # where 5,000 tasks would get 8: the decisions must not depend on how many.
    rows, proc = _compare(
        [bench_pool], tmp_path, "[dedup]\nsemantic = false\nshards = 32\n[decontam]\nbenchmarks = ['gsm8k']\n"
    )
    assert "hash shards (done): 32 shards" in proc.stderr
    assert len(rows) == 5000
    stages = {r["drop_stage"] for r in rows if r["status"] == "dropped"}
    assert {"exact_dedup", "near_dedup"} <= stages


@pytest.mark.slow
def test_batch_path_same_decisions_against_a_pool(bench_pool, tmp_path):
    files = sorted(bench_pool.glob("*.jsonl"))
    # Three edge shards and five bucket shards (not the defaults): the
    # decisions must not depend on how many; the pool's bucket records go to
    # the delivery's bucket shards.
    rows, _ = _compare(
        [files[0]],
        tmp_path,
        "[dedup]\nsemantic = false\nedge_shards = 3\nshards = 5\n",
        "--dedup-against",
        str(files[1]),
        memory_mib=1,
    )
    assert any(r["drop_stage"] == "against_pool" for r in rows)


@pytest.mark.slow
def test_batch_path_same_decisions_on_the_same_problem_hard_cases(tmp_path):
    import same_problem_cases as cases

    rows, n = [], 0
    for a, b in cases.paraphrase_pairs() + cases.sibling_pairs():
        for t in (a, b):
            n += 1
            rows.append(
                {
                    k: v
                    for k, v in dict(t, task_id=f"{t['task_id']}-{n}", domain=t.get("domain") or "math").items()
                    if k in ("task_id", "prompt", "answer", "domain", "tests", "entry_point")
                }
            )
    delivery = tmp_path / "hard.jsonl"
    delivery.write_text("".join(json.dumps(r) + "\n" for r in rows))
    # The meaning stage on (the default); every edge judged in one edge
    # shard, and ids, hashes, buckets and meaning keys in three shards.
    got, _ = _compare([delivery], tmp_path, "[dedup]\nedge_shards = 1\nshards = 3\n")
    assert any(r["drop_reason"] == "near_duplicate" and '"semantic"' in (r["drop_detail"] or "") for r in got)


@pytest.mark.slow
def test_batch_path_same_decisions_and_quarantine_on_the_hostile_corpus(tmp_path):
    import hostile

    corpus = hostile.build(tmp_path / "corpus")
    rows, _ = _compare([corpus.hostile_in], tmp_path, "[dedup]\n", memory_mib=0)
    assert sum(r["status"] == "quarantined" for r in rows) >= 1000


@pytest.mark.slow
def test_ids_that_spell_another_node_lose_no_row_and_hide_no_copy(tmp_path):
    """Task nodes are built from (source, task_id), which a delivery writes:
    ids holding the separator or the source "pool" once spelled another
    task's node (a row lost on the reference path, a near copy kept on the
    batch path) or a pool node (copies never paired). Each crafted pair
    below is a near copy: exactly one of each must go, on both paths, and
    no row may vanish; the unrelated rows must stay."""
    us = "\x1f"
    one = "Compute the sum of the first hundred odd positive integers and explain each step of the work."
    two = "A train leaves the station at noon and travels west; find when it passes the second signal box."
    three = "Describe how a binary search tree keeps its keys ordered, and give the cost of one lookup."
    rows = [
        {"source": f"a{us}b", "task_id": "c", "prompt": one},
        {"source": "a", "task_id": f"b{us}c", "prompt": one + "!"},
        {"source": "pool", "task_id": "p1", "prompt": two},
        {"source": "pool", "task_id": "p2", "prompt": two + "!"},
        {
            "source": "pool",
            "task_id": f"x{us}a",
            "prompt": "Name the largest planet and give its radius in km, please.",
        },
        {"source": f"{us}1:pool", "task_id": "p3", "prompt": three},
        {
            "source": f"{us}1:x",
            "task_id": "p4",
            "prompt": "List the primes below fifty whose digits sum to an odd number.",
        },
        {"source": "x", "task_id": f"p4{us}", "prompt": three + "!"},
    ]
    delivery = tmp_path / "crafted.jsonl"
    delivery.write_text("".join(json.dumps(dict(r, answer="1", domain="math")) + "\n" for r in rows))
    pool = tmp_path / "pool.jsonl"  # its row's pool node is "pool<US>x<US>a", the crafted task's old node
    pool.write_text(
        json.dumps(
            {
                "source": "x",
                "task_id": "a",
                "prompt": "Describe the water cycle in four short steps.",
                "answer": "1",
                "domain": "math",
            }
        )
        + "\n"
    )
    got, proc = _compare([delivery], tmp_path, "[dedup]\nsemantic = false\n", "--dedup-against", str(pool))
    assert len(got) == len(rows) and "OK" in proc.stdout
    status = {(r["source"], r["task_id"]): r["status"] for r in got}
    for pair in (
        ((f"a{us}b", "c"), ("a", f"b{us}c")),
        (("pool", "p1"), ("pool", "p2")),
        ((f"{us}1:pool", "p3"), ("x", f"p4{us}")),
    ):
        assert sorted(status[k] for k in pair) == ["dropped", "kept"], pair
    assert status[("pool", f"x{us}a")] == status[(f"{us}1:x", "p4")] == "kept"


def test_repeated_ids_are_the_first_by_position_rule_on_id_records():
    """batch.repeated_ids sees only id records, never the tasks: for random
    id shards (ids repeated up to 5 times, across files, with separators
    that make two ids spell one string) the rows it names must be exactly
    the later rows of each (source, task_id) by validate.first_by_position,
    each sent to its own hash shard with the first row's file and line."""
    from tasksieve.transforms.batch.chunks import pack
    from tasksieve.transforms.batch.dedup import IDS, REPEATS, repeated_ids
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


@pytest.mark.slow
def test_repeated_ids_are_quarantined_as_on_the_row_path(tmp_path):
    """A delivery repeats ids within a file and across files, three times
    and more, with the same prompt (rows exact dedup would also want) and
    with other prompts (rows hashed to other shards than their first): the
    first row by (file, line) stays, each later row is quarantined naming
    it, the same on both paths, with every value spilled."""
    rng = random.Random(5)
    prompts = [
        f"Problem {i}: find x when {i + 2}x + {i + 1} = {7 * i + 3}, and show each step of the work." for i in range(12)
    ]
    folder = tmp_path / "in"
    folder.mkdir()
    rows = {}
    for name in ("b.jsonl", "a.jsonl"):  # b is written first; a sorts first, so its rows come first
        rows[name] = [
            {
                "source": rng.choice(["s1", "s2"]),
                "task_id": f"t{rng.randint(0, 60)}",
                "prompt": rng.choice(prompts) + ("" if rng.random() < 0.5 else f" ({name} {n})"),
                "answer": "1",
                "domain": "math",
            }
            for n in range(150)
        ]
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows[name]))
    got, proc = _compare(
        [folder / "b.jsonl", folder / "a.jsonl"], tmp_path, "[dedup]\nsemantic = false\n", memory_mib=0
    )
    assert "OK" in proc.stdout
    first = {}
    for name in ("a.jsonl", "b.jsonl"):
        for line, r in enumerate(rows[name], 1):
            first.setdefault((r["source"], r["task_id"]), (name, line))
    assert len(first) < 250  # ids do repeat, within and across the files
    quarantined = [r for r in got if r["status"] == "quarantined"]
    assert len(quarantined) == 300 - len(first)
    for r in got:
        where = (Path(r["source_file"]).name, r["line"])
        assert (r["status"] == "quarantined") == (where != first[(r["source"], r["task_id"])]), r
    for q in _table(tmp_path / "batch", "quarantine"):
        name, line = first[(q["source"], q["task_id"])]
        assert q["reason"].endswith(f"{name}:{line})") and "repeats within source" in q["reason"], q


@pytest.mark.slow
def test_batch_path_same_decisions_on_dask(sample_dir, tmp_path):
    _compare([sample_dir], tmp_path, "[dedup]\n", batch_extra=("--runner", "dask", "--dask-workers", "2"))


@pytest.mark.slow
@pytest.mark.parametrize("runner", [(), ("--runner", "dask", "--dask-workers", "2")], ids=["in_process", "dask"])
def test_candidates_with_none_confirmed_keep_every_row(tmp_path, runner):
    """Siblings of one template: near-identical words, other numbers and
    answers. MinHash pairs them and the same-problem rules clear every
    pair, so the cluster step has no confirmed edge and outputs nothing at
    all (not an empty map); every row must still come out kept, as on the
    reference path, on both runners."""
    template = (
        "A farmer has {a} crates of apples with {b} apples in each crate, and sells {c} apples at the "
        "market on Saturday morning. How many apples does the farmer have left after the market?"
    )
    rows = []
    for i, (a, b, c) in enumerate([(3, 12, 7), (4, 15, 9), (6, 11, 5), (8, 13, 21), (9, 14, 30)]):
        rows.append(
            {"task_id": f"s{i}", "domain": "math", "prompt": template.format(a=a, b=b, c=c), "answer": str(a * b - c)}
        )
    # Every sibling shares a band with the first (a candidate edge), at a
    # shingle Jaccard over the threshold: only the rules can clear them.
    texts = [normalize_text(r["prompt"]) for r in rows]
    p = MinHashParams()
    keys = shards.text_bands(texts, p)
    inter, lens = jaccard_counts(texts, np.zeros(len(rows) - 1, dtype=np.int64), np.arange(1, len(rows)), p)
    assert all(set(keys[0].tolist()) & set(k.tolist()) for k in keys[1:])
    assert all(similarity(x, lens[0], lens[j]) >= DedupConfig().threshold for j, x in enumerate(inter.tolist(), 1))
    delivery = tmp_path / "siblings.jsonl"
    delivery.write_text("".join(json.dumps(r) + "\n" for r in rows))
    got, proc = _compare([delivery], tmp_path, "[dedup]\nsemantic = false\n", batch_extra=runner)
    assert [r["status"] for r in got] == ["kept"] * len(rows) and "OK" in proc.stdout


def test_vllm_can_load_after_the_compiled_kernels():
    """numba's llvmlite answers any attribute with a C-function wrapper; vLLM's
    CPU worker scans every module's objects with `vars(x).get(...)` and failed
    to load the model once the kernels had run. Replays that scan (vLLM 0.32,
    triton_utils/dispatcher.py) after the kernels, with the guard the vLLM
    backend applies before loading."""
    from tasksieve.transforms.backends.vllm import guard_llvmlite

    # The JIT kernels: an ahead-of-time build (kernels_build.py) loads no llvmlite.
    assert kernels._compile() is not None and "llvmlite.binding.ffi" in sys.modules
    guard_llvmlite()
    for module in list(sys.modules.values()):
        for value in list((getattr(module, "__dict__", None) or {}).values()):
            if hasattr(value, "__dict__"):
                vars(value).get("kernel")


def test_the_vllm_guard_is_a_no_op_where_numba_never_ran():
    code = (
        "import sys\nfrom tasksieve.transforms.backends.vllm import guard_llvmlite\nguard_llvmlite()\n"
        "assert 'llvmlite.binding.ffi' not in sys.modules\nprint('ok')"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-2000:]


def test_progress_rates_a_burst_over_the_run_and_a_stream_over_itself(monkeypatch, capsys):
    """A step whose elements all come at once (kept rows, once near dedup
    has decided) showed millions of rows/s when rated from its first
    element; it is rated over the run so far. A step that streams keeps
    its own pace (its ETA depends on it)."""
    from tasksieve.transforms import progress

    now = [100.0]  # the graph is built
    monkeypatch.setattr(progress.time, "time", lambda: now[0])

    def done_line(arrivals):
        step = progress.Progress("dedup: kept", total=None)
        step.setup()
        for at, rows in arrivals:
            now[0] = at
            assert list(step.process((rows, "packed"))) == [(rows, "packed")]  # passed on unchanged
        now[0] = 500.0  # teardown comes when the whole pipeline ends: not the step's rate
        step.teardown()
        return capsys.readouterr().err.splitlines()[-1].strip()

    assert done_line([(110.0, 600), (110.000001, 400)]) == "dedup: kept (done): 1,000 rows, 100 rows/s"
    assert done_line([(110.0, 600), (115.0, 400)]) == "dedup: kept (done): 1,000 rows, 200 rows/s"
