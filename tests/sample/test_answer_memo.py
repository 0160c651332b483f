"""The math worker's answers kept for the process (transforms/verify/answer_memo.py):
a request asked again skips the worker, and no verdict changes."""

from __future__ import annotations

import random

import pytest

from tasksieve.transforms.verify import answer_memo
from tasksieve.transforms.verify import math_answers as vm

# References and completions: plain, LaTeX, sets, broken, hostile (sprays,
# several boxes, alternatives, unparsable and over-long answers).
PAIRS = [
    ("42", "The answer is \\boxed{42}"),
    ("42", "\\boxed{42.0}"),
    ("42", "\\boxed{41} or maybe \\boxed{42}"),
    ("42", "Final answer: 41, 42, 0, 1"),
    ("42", "I don't know."),
    ("42", ""),
    ("42", "So 40 + 2 = 42."),
    ("\\frac{1}{2}", "\\boxed{0.5}"),
    ("\\frac{1}{2}", "\\boxed{1/2}"),
    ("\\frac{1}{2}", "\\boxed{2}"),
    ("{1, 2}", "\\boxed{\\{2, 1\\}}"),
    ("x^2 + 1", "\\boxed{1 + x^2}"),
    ("x^2 + 1", "\\boxed{x^2}"),
    ("}{", "\\boxed{}{}"),
    ("???", "\\boxed{???}"),
    ("\\sqrt{2}", "\\boxed{2^{1/2}}"),
    ("1,000", "\\boxed{1000}"),
    ("7", "The answer is 7 or 8."),
    ("7", "\\boxed{" + "7" * 300 + "}"),
    ("-7", "\\boxed{-7}"),
    ("-7", "\\boxed{7}"),
]


def _counted(monkeypatch) -> list:
    calls, ask_many = [], vm._MathWorker.ask_many

    def counted(self, requests, timeout_s):
        calls.append(len(requests))
        return ask_many(self, requests, timeout_s)

    monkeypatch.setattr(vm._MathWorker, "ask_many", counted)
    return calls


def _verdict(v: dict) -> tuple:
    return v["passed"], v["score"], v["extracted_answer"], v["error"]


def test_an_answer_asked_again_skips_the_worker(monkeypatch):
    calls = _counted(monkeypatch)
    first = vm.verify_math("42", "The answer is \\boxed{42}")
    assert calls == [1] and answer_memo.kept() == 1
    again = [vm.verify_math("42", c) for c in ("\\boxed{42}", "So the answer is \\boxed{42}.", "Final answer: 42")]
    assert calls == [1]  # the same request (reference "42", candidate "42") each time
    assert {_verdict(v) for v in again} == {_verdict(first)} == {(True, 1.0, "42", None)}
    vm.verify_math("42", "\\boxed{43}")
    assert calls == [1, 1]  # another candidate: asked


def test_verdicts_are_the_same_with_and_without_the_memo(monkeypatch):
    """Every pair, in two shuffled orders, with the memo warm, gives what
    asking the worker each time gives; and so does the batch asked ahead."""
    monkeypatch.setattr(answer_memo, "remember", lambda key, answer: None)
    alone = {p: _verdict(vm.verify_math(*p, timeout_s=5)) for p in PAIRS}
    monkeypatch.undo()
    calls = _counted(monkeypatch)
    rng = random.Random(7)
    for _ in range(2):
        order = PAIRS[:]
        rng.shuffle(order)
        assert {p: _verdict(vm.verify_math(*p, timeout_s=5)) for p in order} == alone
    for rounds in range(2):  # a batch asks every answer of a completion, where verify_math stops at a wrong one
        asked = sum(calls)
        for ref, completion in PAIRS:
            with vm.answered_ahead(ref, [completion], "", timeout_s=5):
                assert _verdict(vm.verify_math(ref, completion, 5)) == alone[(ref, completion)]
    assert sum(calls) == asked  # the second round: all known, nothing asked
    assert {v[0] for v in alone.values()} == {True, False}  # the pairs test both verdicts


class _Worker:
    """A worker whose every answer is `answer` (None: the deadline passed)."""

    def __init__(self, answer):
        self.answer, self.asked = answer, 0

    def ask(self, request, timeout_s):
        self.asked += 1
        return self.answer

    def kill(self):
        pass


@pytest.mark.parametrize(
    "answer",
    [
        None,
        {"ok": False, "error": "memory"},
        {"ok": False, "error": "verifier_error: RecursionError"},
        {"ok": True, "error": None, "extra": 1},
    ],
)
def test_what_the_request_alone_does_not_decide_is_asked_again(monkeypatch, answer):
    """A timeout, a worker that ran out of memory or crashed, or an answer
    of an unknown shape depends on more than the request: never kept."""
    worker = _Worker(answer)
    monkeypatch.setattr(vm, "_take", lambda: worker)
    monkeypatch.setattr(vm, "_give_back", lambda w: None)
    request = vm._math_request("1", "9^{9^{9^{9}}}")
    got = [vm.ask_with_deadline(request, 1) for _ in range(3)]
    assert worker.asked == 3 and answer_memo.kept() == 0
    assert got[0] == got[2]


@pytest.mark.parametrize(
    "answer",
    [{"ok": True, "error": None}, {"ok": False, "error": None}, {"ok": False, "error": "reference_unparsable"}],
)
def test_what_the_request_decides_is_asked_once(monkeypatch, answer):
    worker = _Worker(answer)
    monkeypatch.setattr(vm, "_take", lambda: worker)
    monkeypatch.setattr(vm, "_give_back", lambda w: None)
    request = vm._math_request("1", "1")
    assert [vm.ask_with_deadline(request, 1) for _ in range(3)] == [answer] * 3
    assert worker.asked == 1


def test_a_recalled_answer_is_a_copy():
    key = ("math", "1", "1")
    answer_memo.remember(key, {"ok": True, "error": None})
    answer_memo.recall(key)["ok"] = False
    assert answer_memo.recall(key) == {"ok": True, "error": None}


def test_the_memo_is_bounded_oldest_out_first(monkeypatch):
    monkeypatch.setattr(answer_memo, "MAX_CHARS", 100)
    keys = [("math", f"{i:02d}", "x" * 4) for i in range(50)]  # 10 characters each
    for k in keys:
        answer_memo.remember(k, {"ok": True, "error": None})
    assert answer_memo.kept() == 10
    assert all(answer_memo.holds(k) for k in keys[-10:]) and not answer_memo.holds(keys[0])
    long = ("math", "1", "2" * answer_memo.MAX_KEY_CHARS)
    answer_memo.remember(long, {"ok": False, "error": None})
    assert not answer_memo.holds(long) and answer_memo.kept() == 10
