"""The benchmark index's candidate generators skip work only where the
skipped work cannot change their answer: word n-grams hashed in C, fuzzy
alignment only for items sharing enough words to reach the threshold,
quantity candidates counted only for items of a size that could pass.
Each is checked against the plain computation (the code before the
shortcuts, kept here) on a bench pool, reworded benchmark items and the
hard cases, at two n-gram lengths and two fuzzy thresholds."""

import json
import math
import random
import sys
import tempfile
from difflib import SequenceMatcher
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import same_problem_cases as cases  # noqa: E402

from tasksieve.transforms.decontam.benchmarks import ngram_hash, ngrams, words  # noqa: E402
from tasksieve.transforms.decontam.index import build_index  # noqa: E402
from tasksieve.transforms.same_problem.quantities import quantities  # noqa: E402

ALL = ["gsm8k", "aime2025", "gpqa_diamond", "humaneval"]


def _texts() -> list[str]:
    from dedup import make_pool

    with tempfile.TemporaryDirectory() as d:
        make_pool(1200, Path(d), seed=17)
        pool = [json.loads(line)["prompt"] for f in sorted(Path(d).glob("*.jsonl")) for line in open(f)]
    rng = random.Random(3)
    items = [i["text"] for name in ALL for i in cases.ITEMS[name]() if not i["id"].endswith("/answer")]
    reworded = []
    for text in rng.sample(items, 150):
        ws = text.split()
        # Drop every k-th word and swap a neighbour pair: fuzzy alignment's territory.
        k = rng.randint(3, 7)
        ws = [w for j, w in enumerate(ws) if j % k != 1]
        if len(ws) > 4:
            j = rng.randrange(len(ws) - 1)
            ws[j], ws[j + 1] = ws[j + 1], ws[j]
        reworded.append(" ".join(ws))
    hard = [r["prompt"] for r in cases.lookalikes() + cases.rewordings() + cases.translations()]
    return pool + reworded + hard


@pytest.fixture(scope="module")
def texts():
    return _texts()


def _fuzzy_plain(index, ws):
    hits = {}
    for h in {h for _, h in ngrams(ws, index.probe)}:
        post = index.postings.get(h)
        if post is not None and len(post) <= index.max_df:
            for idx in post:
                hits[idx] = hits.get(idx, 0) + 1
    cands = [i for i, c in hits.items() if c >= max(2, (len(index.meta[i].words) - index.probe + 1) // 5)]
    out = []
    for idx in sorted(cands, key=lambda i: (-hits[i], i))[:5]:
        item_ws = index.meta[idx].words
        blocks = SequenceMatcher(None, item_ws, ws, autojunk=False).get_matching_blocks()
        coverage = sum(b.size for b in blocks) / len(item_ws)
        if coverage >= index.fuzzy_threshold:
            out.append((idx, coverage))
    return out


def _by_quantities_plain(index, tq):
    post = index._quantity_postings()
    n = len(index.meta) + 1
    t_total = sum(tq.values())
    out = {}
    for v in tq:
        for idx in post.get(v, ()):
            if idx in out:
                continue
            q = index.meta[idx].quantities
            common = sum((q & tq).values())
            total = sum(q.values())
            if common < index.rules.numbers_min * total or common < 0.5 * t_total:
                out[idx] = None
                continue
            surprise = sum(math.log(n / (index.qdf[x] + 1)) for x in (q & tq))
            out[idx] = round(common / total, 4) if surprise >= index.min_surprise else None
    return sorted(((i, s) for i, s in out.items() if s is not None), key=lambda x: (-x[1], x[0]))


def test_ngrams_are_every_window_hashed_as_a_whole():
    ws = "a b c d e f".split()
    assert list(ngrams(ws, 3)) == [(i, ngram_hash(ws[i : i + 3])) for i in range(4)]
    assert list(ngrams(ws, 6)) == [(0, ngram_hash(ws))]
    assert list(ngrams(ws, 7)) == [] and list(ngrams(ws, 0)) == []
    assert ngram_hash(["a", "b c"]) != ngram_hash(["a b", "c"])  # word boundaries count


@pytest.mark.parametrize("n,threshold", [(13, 0.6), (8, 0.8)])
def test_fuzzy_candidates_equal_aligning_every_candidate(texts, n, threshold):
    index = build_index(n, ALL, [], fuzzy_threshold=threshold)
    found = 0
    for text in texts:
        ws = words(text)
        fast = index._aligned(ws, index._probe_hits(ws), first_only=False)
        assert fast == _fuzzy_plain(index, ws), text[:80]
        assert index._aligned(ws, index._probe_hits(ws), first_only=True) == fast[:1]
        found += bool(fast)
    assert found >= 50  # the reworded items reach the alignment


def test_quantity_candidates_equal_counting_every_posted_item(texts):
    index = build_index(13, ALL, [])
    found = 0
    for text in texts:
        tq = quantities(text)
        fast = index._by_quantities(tq)
        assert fast == _by_quantities_plain(index, tq), text[:80]
        found += bool(fast)
    assert found >= 20


def test_a_probe_holds_what_judge_would_compute(texts):
    index = build_index(13, ALL, [])
    for text in texts[:300]:
        probe = index.probe_of({"prompt": text})
        assert probe.words == words(text) and probe.quantities == quantities(text)
        assert probe.lexical == index._lexical(words(text))
        assert index.by_quantities(probe) == index._by_quantities(quantities(text))
        assert probe.quantity_candidates is not None  # computed once, then kept


def _edge_texts(index) -> list[str]:
    """Texts at the edges of the window look-up: empty, shorter than every
    window, words in no item, an item whole, an item repeated, items run
    together (windows across them), other scripts, case and spacing."""
    items = [m.text for m in index.meta[:40]] + [m.text for m in index.meta[-40:]]
    return [
        "",
        "one",
        "zzqx " * 30,
        *items,
        " ".join(items[:3]),
        (items[0] + " ") * 5,
        " ".join(items[4].split()[:6] * 4),  # one item's grams, each several times
        items[1].upper().replace(" ", "   "),
        "Natalia vendió clips a 48 de sus amigas en abril " + items[2],
        "数学 问题 " + items[3][: len(items[3]) // 2],
    ]


@pytest.mark.parametrize(
    "n,checks",
    [(13, {}), (8, {"fuzzy_threshold": 0.8}), (8, {"short_min_words": 2}), (13, {"fuzzy": False})],
)
def test_chunk_probes_equal_row_probes(texts, tmp_path, n, checks):
    """batch_probe.probes_of finds each text's candidates, with their
    evidence, exactly as probe_of does row by row, whatever the chunk."""
    from tasksieve.transforms.decontam.batch_probe import probes_of

    user = tmp_path / "user.jsonl"  # short items: whole-sequence windows of their own lengths
    shorts = ["what is the capital of france", "name two noble gases", "define a prime number", "sort this list"]
    user.write_text("".join(json.dumps({"question": q, "answer": "x"}) + "\n" for q in shorts))
    index = build_index(n, ALL, [str(user)], **checks)
    assert index.short or checks.get("short_min_words", 4) > 4
    pool = texts + _edge_texts(index) + [f"Please: {q}, and explain." for q in shorts]
    rows = [{"prompt": t} for t in pool]
    want = [index.probe_of(r) for r in rows]
    assert probes_of(index, rows) == want
    assert sum(bool(p.lexical) for p in want) >= 100
    kinds = {ev["check"] for p in want for _, ev in p.lexical}
    assert {"ngram", "short_item"} <= kinds and ("fuzzy" in kinds) == checks.get("fuzzy", True)
    for start in range(0, len(rows), 97):  # other chunk boundaries, the same probes
        assert probes_of(index, rows[start : start + 97]) == want[start : start + 97]
    if index.fuzzy:  # the shared-gram counts themselves, where alignment would hide a wrong one
        found = index.windows[1].found(index, [p.words for p in want])
        need = index.fuzzy_min_hits
        assert [f.fuzzy for f in found] == [
            {i: c for i, c in index._probe_hits(p.words).items() if c >= need[i]} for p in want
        ]


def test_chunk_probes_fall_back_to_rows_when_index_grams_share_a_hash(texts):
    from tasksieve.transforms.decontam import batch_probe

    index = build_index(13, ALL, [])
    rows = [{"prompt": t} for t in texts[:200]]
    batch_probe.probes_of(index, rows[:1])
    index.windows[1].exact = False  # as if two of the index's probe-grams shared a hash
    assert index.windows[1].fuzzy is not None
    assert batch_probe.probes_of(index, rows) == [index.probe_of(r) for r in rows]


def test_chunk_quantity_candidates_equal_row_ones(texts):
    from tasksieve.transforms.decontam.batch_probe import probes_of, quantity_candidates

    index = build_index(13, ALL, [])
    extra = [" ".join(f"{v} apples" for v in m.quantities.elements()) for m in index.meta[:200]]
    rows = [{"prompt": t} for t in texts + extra + ["", "7 7 7 7 7 7 7", "1/2 of 0.5 is 25%"]]
    chunk = probes_of(index, rows)
    quantity_candidates(index, chunk)
    rowwise = [index._by_quantities(quantities(r["prompt"])) for r in rows]
    assert [p.quantity_candidates for p in chunk] == rowwise
    assert sum(bool(c) for c in rowwise) >= 100


def test_remembered_coverage_is_the_computed_one(texts):
    """Idf.coverage keeps the last answers by the identity of both word
    lists: the same value as computing it, for lists equal but not the
    same, and no stale value once the weights change (add)."""
    index = build_index(13, ALL, [])
    idf = index.idf
    tasks = [words(t) for t in texts[:200]]
    for k, ws in enumerate(tasks):
        item = index.meta[(k * 37) % len(index.meta)].words
        first = idf.coverage(item, ws)
        assert first == idf._coverage(item, ws) == idf.coverage(item, ws) == idf.coverage(list(item), list(ws))
    item = index.meta[5].words
    ws = item[: len(item) // 2] + ["and", "more", "words"]  # half the item: the share depends on weights
    before = idf.coverage(item, ws)
    for _ in range(50):
        idf.add(item[:3])  # the item's first words become common: they weigh less
    assert idf.coverage(item, ws) == idf._coverage(item, ws) != before
