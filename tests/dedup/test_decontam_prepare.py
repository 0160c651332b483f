"""Decontamination asks ahead (transforms/decontam/ask_ahead.py): the math-verify
comparisons judge will need go to the worker pool in batches, the
embeddings it will need are computed in one batch; judge then finds both
and decides as it would alone. Checked: the requests are the ones
answers_agree makes, asked-ahead answers equal answers asked alone, judge
asks the workers nothing more afterwards, and the decisions are those of
check_task asked cold."""

import json
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import same_problem_cases as cases  # noqa: E402

from tasksieve.transforms.decontam.ask_ahead import ask_ahead  # noqa: E402
from tasksieve.transforms.decontam.index import build_index  # noqa: E402
from tasksieve.transforms.decontam.prefilter import decontaminate_rows, settled_clean  # noqa: E402
from tasksieve.transforms.decontam.stage import check_task  # noqa: E402
from tasksieve.transforms.same_problem import rules  # noqa: E402
from tasksieve.transforms.verify import answer_memo, math_answers  # noqa: E402

PAIRS = [
    ("98", "(1+n*v)/(n+v)"),
    ("\\boxed{12}", "12"),
    ("12", "12.0"),
    ("1/2", "0.5"),
    ("\\frac{1}{2}", "0.5"),
    ("x^2+1", "1+x^2"),
    ("Yes", "no"),
    ("Paris", "Paris"),
    ("Paris", "42"),
    ("B", "C"),
    ("{1, 2}", "{2, 1}"),
    ("", "3"),
    (None, "3"),
    ("2\\sqrt{2}", "\\sqrt{8}"),
    ("10^-4 eV", "a long sentence about energy"),
    ("3x", "x*3"),
]


def _pool(n: int, seed: int) -> list[dict]:
    """bench/dedup.py's pool: tasks of 2-5 GSM8K test and GPQA sentences, numbers redrawn."""
    from dedup import make_pool

    with tempfile.TemporaryDirectory() as d:
        make_pool(n, Path(d), seed=seed)
        return [json.loads(line) for f in sorted(Path(d).glob("*.jsonl")) for line in open(f)]


class _Cosine(float):
    """A cosine in evidence, equal to another within 1e-3: the encoder's
    vector of a text moves by ~1e-7 with the texts it is batched with
    (BLAS), and which batch computes it first differs between asking ahead
    and judging cold, so at 4 decimals a cosine can round either way."""

    def __eq__(self, other):
        return isinstance(other, float) and abs(self - other) <= 1e-3

    __hash__ = float.__hash__


def _decided(rows: list) -> list:
    """Drops as compared here: the evidence's cosine as _Cosine."""
    out = []
    for r in rows:
        if r is not None:
            detail = json.loads(r["drop_detail"])
            if "cosine" in detail:
                detail["cosine"] = _Cosine(detail["cosine"])
            r = dict(r, drop_detail=detail)
        out.append(r)
    return out


@pytest.fixture
def worker_calls(monkeypatch):
    calls = []
    real = math_answers._MathWorker.ask_many

    def counted(self, requests, timeout_s):
        calls.extend(requests)
        return real(self, requests, timeout_s)

    monkeypatch.setattr(math_answers._MathWorker, "ask_many", counted)
    return calls


def test_math_request_is_exactly_what_answers_agree_asks(monkeypatch):
    asked = []
    monkeypatch.setattr(
        math_answers, "ask_with_deadline", lambda req, t: asked.append(req) or {"ok": True, "error": None}
    )
    for a, b in PAIRS:
        asked.clear()
        rules.answers_agree(a, b)
        want = rules.math_request(a, b)
        assert asked == ([want] if want is not None else []), (a, b)
    assert sum(rules.math_request(a, b) is not None for a, b in PAIRS) >= 4  # the list reaches the worker


def test_asked_ahead_answers_equal_those_asked_alone_and_are_not_asked_again(worker_calls):
    requests = [rules.math_request(a, b) for a, b in PAIRS]
    requests = [r for r in requests if r is not None]
    alone = [math_answers.ask_with_deadline(r, 5.0) for r in requests]
    answer_memo.forget()
    worker_calls.clear()
    math_answers.ask_all(requests + requests[:2], 5.0)()  # duplicates asked once
    assert len(worker_calls) == len({math_answers._request_key(r) for r in requests})
    worker_calls.clear()
    assert [math_answers.ask_with_deadline(r, 5.0) for r in requests] == alone
    assert worker_calls == []


def test_a_request_the_memo_holds_is_not_asked_ahead(worker_calls):
    r = rules.math_request("2\\sqrt{2}", "\\sqrt{8}")
    math_answers.ask_with_deadline(r, 5.0)
    worker_calls.clear()
    math_answers.ask_all([r], 5.0)()
    assert worker_calls == []


def test_prepared_decontamination_decides_as_cold_check_task_and_judge_asks_nothing_more(worker_calls):
    from tasksieve.transforms.same_problem import embed

    index = build_index(13, ["gsm8k", "aime2025", "gpqa_diamond", "humaneval"], [])
    rows = cases.lookalikes() + cases.rewordings() + cases.translations()
    rows += [t for p in cases.paraphrase_pairs()[:20] for t in p]
    # Numeric answers against benchmark items whose answers are expressions: the worker's work.
    rows += [dict(r, answer=str(40 + i)) for i, r in enumerate(cases.rewordings()[:20])]
    # Items whose answers are expressions, asked verbatim with a number: the text confirms them
    # whatever the meaning, so the comparison is needed.
    mathy = [m for m in index.meta if m.answer and rules.math_request("98", m.answer) is not None]
    rows += [{"task_id": f"m{i}", "prompt": m.text, "answer": str(90 + i)} for i, m in enumerate(mathy[:6])]
    # Tasks made of GSM8K and GPQA sentences: number-poor word candidates, whose answers
    # matter only where the meaning is close (ask_ahead embeds first, then asks those).
    rows += _pool(1500, seed=3)
    cold = [check_task(r, index) for r in rows]
    answer_memo.forget()
    embed.get_model().cache.clear()
    worker_calls.clear()
    unsettled = [r for r in rows if not settled_clean(index, r)]
    ask_ahead(index, unsettled)
    asked_ahead = len(worker_calls)
    worker_calls.clear()
    warm = [check_task(r, index) for r in unsettled]
    assert _decided(warm) == _decided([c for r, c in zip(rows, cold) if not settled_clean(index, r)])
    assert asked_ahead > 0 and worker_calls == []  # everything judge needed was asked ahead
    answer_memo.forget()
    clean, dropped = decontaminate_rows(rows, index)
    assert _decided(dropped) == _decided([c for c in cold if c is not None]) and dropped
    assert clean == [r for r, c in zip(rows, cold) if c is None]


def test_lazy_answers_give_the_same_drops_and_evidence_as_comparing_every_answer(monkeypatch, worker_calls):
    """judge_item(lazy_answer=True), as decontamination calls it, skips the
    answer comparison only where no outcome of it could confirm: the same
    verdicts and the same evidence for every drop, fewer worker requests."""
    from tasksieve.transforms.decontam import index as index_mod

    index = build_index(13, ["gsm8k", "aime2025", "gpqa_diamond", "humaneval"], [])
    rows = cases.lookalikes() + cases.rewordings() + cases.translations()
    rows += [dict(r, answer=str(40 + i)) for i, r in enumerate(cases.rewordings()[:20])]
    rows += _pool(600, seed=3)
    lazy = [index.judge(r) for r in rows]
    lazy_asked = len(worker_calls)
    answer_memo.forget()
    worker_calls.clear()
    real = index_mod.judge_item
    monkeypatch.setattr(index_mod, "judge_item", lambda *a, **k: real(*a, **dict(k, lazy_answer=False)))
    eager = [index.judge(r) for r in rows]
    assert lazy == eager and sum(e is not None for e in eager) >= 10
    assert lazy_asked < len(worker_calls)
