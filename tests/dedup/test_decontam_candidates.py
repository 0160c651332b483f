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
        fast = index._fuzzy(ws, first_only=False)
        assert fast == _fuzzy_plain(index, ws), text[:80]
        assert index._fuzzy(ws, first_only=True) == fast[:1]
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
