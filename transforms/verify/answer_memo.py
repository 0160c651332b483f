"""Answers the math worker gave, kept for the rest of the process.

Why: a delivery asks the same questions over and over. `tasksieve
validate` checks every math task's verifier with its own reference and
~10 probes, 3-4 distinct candidate answers a task, and tasks share
references ("42") and probes ("0", "1", a wrong answer made from the
reference): 20,000 tasks of the bench pool asked 280,000 answers, of
which 4,005 were distinct. Attempts agree too: k samples of one task
mostly give two or three answers, and same-problem judging compares the
same pairs of answers across a pool. Each answer is a round trip to a
worker process and a parse by sympy, ~0.3 ms at best.

Why the verdict cannot change: the worker's answer is a function of the
request alone (op, reference, candidate): math-verify's parse and
compare, or a regex match, with nothing carried from one request to the
next. What depends on anything else is never kept and is asked again,
as without the memo: a timeout (how busy the machine was), a worker
that failed or ran out of memory (its state), any answer with another
error. A recalled answer is a copy, so no caller can change what the
next one gets.

Bounded: at most MAX_CHARS characters of requests are kept (oldest out
first), and a request longer than MAX_KEY_CHARS is never kept.
In this process only: nothing is written anywhere, so no other run or
user can plant an answer.
"""

from __future__ import annotations

import threading

MAX_CHARS = 16 * 2**20  # ~16-40 MB with the dicts' own overhead
MAX_KEY_CHARS = 2_000
# Errors the request alone decides (math_answers.equivalent, regex_match).
_KEPT_ERRORS = (None, "reference_unparsable", "reference regex is invalid")

_lock = threading.Lock()
_answers: dict = {}  # (op, reference, candidate) -> (answer, chars), oldest first
_chars = {"n": 0}


def _size(key: tuple) -> int:
    return sum(len(part) for part in key if isinstance(part, str))


def recall(key: tuple) -> dict | None:
    """A copy of the answer kept for `key`, or None."""
    got = _answers.get(key)
    return None if got is None else dict(got[0])


def holds(key: tuple) -> bool:
    return key in _answers


def remember(key: tuple, answer: dict | None) -> None:
    """Keep `answer` for `key` if the request alone decided it."""
    if answer is None or set(answer) != {"ok", "error"} or answer["error"] not in _KEPT_ERRORS:
        return
    size = _size(key)
    if size > MAX_KEY_CHARS:
        return
    with _lock:
        if key in _answers:
            return
        while _answers and _chars["n"] + size > MAX_CHARS:
            _chars["n"] -= _answers.pop(next(iter(_answers)))[1]
        _answers[key] = (dict(answer), size)
        _chars["n"] += size


def forget() -> None:
    """Drop every kept answer (tests that count the worker's round trips)."""
    with _lock:
        _answers.clear()
        _chars["n"] = 0


def kept() -> int:
    return len(_answers)
