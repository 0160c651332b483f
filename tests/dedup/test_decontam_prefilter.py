"""The batch path's prefilter (transforms/decontam/prefilter.py) decides
every task as check_task does: the bundled sample, the hard cases, a bench
pool and planted benchmark items (verbatim and with names swapped)."""

import random
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import same_problem_cases as cases  # noqa: E402

from tasksieve.transforms.decontam.index import build_index  # noqa: E402
from tasksieve.transforms.decontam.prefilter import decontaminate_rows, settled_clean  # noqa: E402
from tasksieve.transforms.decontam.stage import check_task  # noqa: E402

ALL = ["gsm8k", "aime2025", "gpqa_diamond", "humaneval"]


def _planted():
    rng = random.Random(5)
    items = [i for i in cases.ITEMS["gsm8k"]() if not i["id"].endswith("/answer")]
    out = []
    for k, it in enumerate(rng.sample(items, 40)):
        text = it["text"]
        if k % 2:
            for a, b in (("Janet", "Maria"), ("James", "Omar"), ("John", "Ravi"), ("she", "he"), ("her", "his")):
                text = re.sub(rf"\b{a}\b", b, text)
        out.append({"task_id": f"c{k}", "domain": "math", "prompt": text, "answer": it["answer"] if k % 3 else None})
    for name in ALL[1:]:
        for k, it in enumerate(list(cases.ITEMS[name]())[:4]):
            out.append({"task_id": f"{name}{k}", "domain": "math", "prompt": it["text"], "answer": it.get("answer")})
    return out


def _pool_rows(n):
    from dedup import make_pool

    import json
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        make_pool(n, Path(d), seed=11)
        return [json.loads(line) for f in sorted(Path(d).glob("*.jsonl")) for line in open(f)]


def _sample_rows():
    from tasksieve.pipeline.setup.sample_data import build_tasks

    return [t for rows in build_tasks().values() for t in rows if isinstance(t, dict) and "prompt" in t]


def _same(rows, index):
    clean, dropped = decontaminate_rows(rows, index)
    expect = [check_task(r, index) for r in rows]
    assert clean == [r for r, e in zip(rows, expect) if e is None]
    assert dropped == [e for e in expect if e is not None]
    return len(dropped)


@pytest.mark.parametrize("n", [8, 13])
def test_prefilter_decides_the_hard_cases_and_planted_items_as_check_task(n):
    index = build_index(n, ALL, [])
    hard = cases.lookalikes() + cases.rewordings() + cases.translations()
    hard += [dict(r, answer=None) for r in cases.translations()]
    hard += [t for p in cases.paraphrase_pairs()[:20] + cases.sibling_pairs()[:20] for t in p]
    planted = _planted()
    assert _same(hard + planted, index) >= len(planted) // 2


def test_prefilter_decides_the_sample_and_a_pool_as_check_task():
    index = build_index(13, ALL, [])
    rows = _sample_rows() + _pool_rows(1500)
    _same(rows, index)
    assert sum(settled_clean(index, r) for r in rows) > len(rows) // 2  # most skip the full check


def test_prefilter_without_confirmation_or_meaning_or_benchmarks():
    rows = _planted() + cases.lookalikes()[:40] + _pool_rows(300)
    for checks in ({"confirm": False}, {"semantic": False}, {"fuzzy": False}):
        _same(rows, build_index(13, ALL, [], **checks))
    assert decontaminate_rows(rows, build_index(13, [], [])) == (rows, [])
