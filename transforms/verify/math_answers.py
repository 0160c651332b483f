"""Verifier `math`: is the attempt's final answer equivalent to the reference?

A completion has ONE final answer, found by the first rule that finds one:
1. `\\boxed{...}` (balanced braces), as the system prompt asks; every
   boxed answer counts, so `\\boxed{41} or maybe \\boxed{42}` has two;
2. the text after "final answer", "answer is" or "answer:" (to the end of
   that line, holding a number or math), every such phrase counting;
3. the last sentence that holds a number, when it holds exactly one
   number, or exactly one equation result ("so 5 + 3 = 8."), that the
   prompt does not already state.
Several answers pass only when every one of them is equivalent to the
reference, and a phrase answer listing alternatives ("41 or 42", "1, 2,
3") counts as several; so spraying numbers or boxing every guess fails,
and an echo of the prompt finds nothing. The rules and what each does to
the bundled sample are in docs/verification.md.

The extracted text and the reference are parsed and compared by
math-verify (symbolic equivalence: 1/2 == 0.5, 12 == 12.0, sets, intervals).
An answer that is not a value as displayed (an invisible character in it,
a hedge, NaN, a computation left undone) is refused before it is parsed,
and a percent is read as hundredths on both sides (answer_form.py).

math-verify's own timeouts use signal.alarm, which fails outside the main
thread (Beam runs DoFns on worker threads), so they are switched off and the
caller enforces the limit: parsing and comparison run in a small pool of
worker processes (`_MathWorker`), and one that overruns its deadline is
killed and replaced. A length cap alone is not enough: the 21 characters
`\\boxed{9^{9^{9^{9}}}}` keep sympy busy for minutes (measured: over 20 s,
then stopped). The `exact` verifier's /regex/ references run in the same
workers under the same deadline (a nested quantifier can backtrack for
hours). Extraction (linear regular expressions) stays in process. An
answer the worker gave is not asked for again in the same process
(answer_memo.py: only answers the request alone decides are kept).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import logging
import os
import queue
import re
import select
import subprocess
import sys
import threading
import time
from typing import Callable

from tasksieve.transforms.verify import answer_form, answer_memo
from tasksieve.transforms.verify.decimal_guard import install_numeric_guard
from tasksieve.transforms.verify.answer_extract import (  # noqa: F401 - extraction lives there, re-exported
    _ANSWER_PHRASE,
    _HAS_MATH,
    _NUMBER,
    MAX_ANSWERS,
    MAX_CANDIDATE_CHARS,
    _boxed_all,
    _last_number_answer,
    _stated_numbers,
    extract_final_answer,
    extract_final_answers,
)

# We switch math-verify's signal-based timeouts off on purpose (see above);
# its warning about that on every call is noise.
logging.getLogger("math_verify").setLevel(logging.ERROR)

DEFAULT_TIMEOUT_S = 5.0
# Workers at once (threads beyond this wait for a free one); see configure().
_POOL_SIZE = {"n": 2}
# Address space of a worker: sympy on a hostile power tower allocates without end.
WORKER_MEMORY_BYTES = 2 * 2**30
STARTUP_TIMEOUT_S = 120.0


def _parse(text: str) -> list:
    """math-verify's parse of an answer (a fresh list: callers may keep it)."""
    return list(_parse_cached(text[:MAX_CANDIDATE_CHARS]))


@functools.lru_cache(maxsize=4096)
def _parse_cached(text: str) -> tuple:
    """Cached in the worker process: a task's sanity check compares its one
    reference with a dozen probes, and the probes repeat across tasks, so
    without it most of the time went to parsing the same texts again."""
    from math_verify import parse

    # Wrap in $...$ so bare numbers and LaTeX both go through LaTeX extraction;
    # the plain form is tried too, for expressions like "3/4".
    parsed = parse(f"${text}$", parsing_timeout=None)
    return tuple(parsed or parse(text, parsing_timeout=None))


def equivalent(reference: str, candidate: str) -> dict:
    """{"ok": bool, "error": str|None}: math-verify, its timeouts off. Runs
    inside a worker process (see _serve); unbounded in time on its own."""
    from math_verify import verify

    install_numeric_guard()
    gold = _parse(reference)
    if not gold:
        return {"ok": False, "error": "reference_unparsable"}
    pred = _parse(candidate)
    return {"ok": bool(pred) and bool(verify(gold, pred, timeout_seconds=None)), "error": None}


def regex_match(pattern: str, candidate: str) -> dict:
    """{"ok", "error"}: a vendor /regex/ reference matched in full. Runs in a
    worker process under the caller's deadline (backtracking is unbounded)."""
    try:
        return {"ok": re.fullmatch(pattern, candidate) is not None, "error": None}
    except re.error:
        return {"ok": False, "error": "reference regex is invalid"}


def _answer(req: dict) -> dict:
    if req.get("op") == "regex":
        return regex_match(req["reference"], req["candidate"])
    return equivalent(req["reference"], req["candidate"])


def _serve() -> None:
    """Worker process main loop: one JSON request per line on stdin, one
    JSON answer per line on stdout."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (WORKER_MEMORY_BYTES, WORKER_MEMORY_BYTES))
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    out = sys.stdout
    sys.stdout = sys.stderr  # stray prints from libraries must not corrupt the protocol
    import math_verify

    del math_verify  # loaded before "ready": start-up does not count against a deadline

    out.write("ready\n")
    out.flush()
    for line in sys.stdin:
        req = json.loads(line)
        try:
            ans = _answer(req)
        except MemoryError:
            ans = {"ok": False, "error": "memory"}
        except Exception as e:  # a parse crash marks the attempt, never the worker
            ans = {"ok": False, "error": f"verifier_error: {type(e).__name__}"}
        out.write(json.dumps(ans) + "\n")
        out.flush()


class _MathWorker:
    """One worker process; used by one thread at a time."""

    def __init__(self):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from tasksieve.transforms.verify.math_answers import _serve; _serve()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.buf = b""
        # One poll object for the worker's life: a selector per answer was
        # three more system calls (create, register, close) on every answer.
        self.fd = self.proc.stdout.fileno()
        self.poll = select.poll()
        self.poll.register(self.fd, select.POLLIN)
        if self._line(STARTUP_TIMEOUT_S) != b"ready":
            self.kill()
            raise RuntimeError("math worker did not start")

    def ask(self, request: dict, timeout_s: float) -> dict | None:
        """The answer, or None when the deadline passed (the caller kills us)."""
        answers = self.ask_many([request], timeout_s)
        return answers[0]

    def ask_many(self, requests: list[dict], timeout_s: float) -> list[dict | None]:
        """The answers to `requests`, written at once and read in order: the
        worker answers one at a time, so each has `timeout_s` from the one
        before, as if asked alone. The list stops at the first None (the
        deadline passed: the caller kills us)."""
        self.proc.stdin.write("".join(json.dumps(r) + "\n" for r in requests).encode())
        self.proc.stdin.flush()
        answers = []
        for _ in requests:
            line = self._line(timeout_s)
            answers.append(None if line is None else json.loads(line))
            if line is None:
                break
        return answers

    def _line(self, timeout_s: float) -> bytes | None:
        end = time.monotonic() + timeout_s
        while b"\n" not in self.buf:
            left = end - time.monotonic()
            if left <= 0 or not self.poll.poll(left * 1000):  # milliseconds, rounded up
                return None
            chunk = os.read(self.fd, 65536)
            if not chunk:
                raise RuntimeError("math worker exited")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line

    def kill(self) -> None:
        try:
            self.proc.kill()
            self.proc.wait(timeout=5)
        except Exception:
            pass


_IDLE: "queue.LifoQueue[_MathWorker | None]" = queue.LifoQueue()
_POOL_LOCK = threading.Lock()
_STARTED = {"n": 0, "all": []}


def configure(workers: int) -> None:
    """How many worker processes at most (the verification parallelism)."""
    _POOL_SIZE["n"] = max(1, int(workers))


def _take() -> _MathWorker:
    with _POOL_LOCK:
        if _IDLE.empty() and _STARTED["n"] < _POOL_SIZE["n"]:
            _STARTED["n"] += 1
            _IDLE.put(None)  # a slot: the worker starts outside the lock
    w = _IDLE.get()
    if w is None:
        try:
            w = _MathWorker()
        except Exception:
            with _POOL_LOCK:
                _STARTED["n"] -= 1
            raise
        _STARTED["all"].append(w)
    return w


def _give_back(w: _MathWorker | None) -> None:
    if w is None:
        with _POOL_LOCK:
            _STARTED["n"] -= 1  # killed: its slot is free for a fresh worker
        return
    _IDLE.put(w)


@atexit.register
def _shutdown() -> None:
    for w in _STARTED["all"]:
        w.kill()


# Answers asked for ahead, in one batch, by this thread (answered_ahead):
# request key -> answer.
_AHEAD = threading.local()
# At most this much of requests goes to a worker in one batch: under a
# pipe's 64 KiB, so the write is taken whole at once and never waits on a
# worker stuck on an earlier request (nothing would end that wait).
AHEAD_MAX_BYTES = 32 * 1024


def _request_key(request: dict) -> tuple:
    return request.get("op"), request["reference"], request["candidate"]


def _timed_out(timeout_s: float) -> dict:
    return {"ok": False, "error": f"timeout (over {timeout_s:g}s)"}


def _math_request(reference: str, answer: str) -> dict:
    """A percent is read as hundredths on both sides (answer_form.py)."""
    return {
        "op": "math",
        "reference": answer_form.percent_value(reference),
        "candidate": answer_form.percent_value(answer),
    }


@contextlib.contextmanager
def answered_ahead(reference: str, completions: list[str], prompt: str = "", timeout_s: float = DEFAULT_TIMEOUT_S):
    """While the block runs, verify_math(reference, c, timeout_s, prompt)
    for each c in `completions` finds its answers asked for already: every
    candidate answer of them goes to one worker in one batch, not one round
    trip each (a math task's sanity check asks 8-10 times for 3-4 distinct
    answers: tests/verify/test_verifier_sanity.py). Only the speed
    changes: each answer is the worker's answer to the same request under
    the same deadline, and verify_math decides on them in its own order.
    What the batch leaves (past AHEAD_MAX_BYTES, after a deadline passed,
    or if the worker fails) is asked when needed, as without it."""
    try:
        _AHEAD.answers, _AHEAD.extracted = {}, {}
        _ask_ahead(reference, completions, prompt, timeout_s)
    except Exception:  # only a shortcut: verify_math asks for itself
        _AHEAD.answers = {}
    try:
        yield
    finally:
        _AHEAD.answers, _AHEAD.extracted = {}, {}


def _ask_ahead(reference: str, completions: list[str], prompt: str, timeout_s: float) -> None:
    batch, size = {}, 0
    for completion in completions:
        # Kept for verify_math, which would extract the same answers again.
        found = _AHEAD.extracted[(completion, prompt)] = extract_final_answers(completion, prompt)
        for a in found[0]:
            request = _math_request(reference, a)
            key = _request_key(request)
            if (
                len(a) > MAX_CANDIDATE_CHARS
                or key in batch
                or answer_memo.holds(key)
                or answer_form.refusal(a, reference)
            ):
                continue  # (an answer the memo holds is found there by ask_with_deadline)
            n = len(json.dumps(request)) + 1  # ASCII: characters are bytes
            if size + n > AHEAD_MAX_BYTES:
                continue
            size += n
            batch[key] = request
    if not batch:
        return
    w = _take()
    try:
        answers = w.ask_many(list(batch.values()), timeout_s)
    except Exception:
        w.kill()
        _give_back(None)
        return
    for key, answer in zip(batch, answers):
        answer_memo.remember(key, answer)
    if answers[-1] is None:
        w.kill()
        _give_back(None)
        answers[-1] = _timed_out(timeout_s)  # what asking it alone gives
    else:
        _give_back(w)
    _AHEAD.answers = dict(zip(batch, answers))


def _final_answers(completion: str, prompt: str) -> tuple[list[str], str]:
    """extract_final_answers(completion, prompt), taken from answered_ahead's
    block when it extracted them already."""
    made = getattr(_AHEAD, "extracted", None)
    found = made.get((completion, prompt)) if made else None
    return found if found is not None else extract_final_answers(completion, prompt)


def ask_with_deadline(request: dict, timeout_s: float) -> dict:
    key = _request_key(request)
    ahead = getattr(_AHEAD, "answers", None)
    if ahead:
        ans = ahead.get(key)
        if ans is not None:
            return dict(ans)
    ans = answer_memo.recall(key)  # asked before in this process (answer_memo.py)
    if ans is not None:
        return ans
    w = _take()
    try:
        ans = w.ask(request, timeout_s)
    except Exception as e:
        w.kill()
        _give_back(None)
        return {"ok": False, "error": f"verifier_error: math worker failed ({type(e).__name__})"}
    if ans is None:
        w.kill()
        _give_back(None)
        return _timed_out(timeout_s)
    _give_back(w)
    answer_memo.remember(key, ans)
    return ans


def ask_all(requests: list[dict], timeout_s: float) -> Callable[[], None]:
    """Starts asking every request the memo does not hold, spread over the
    worker pool (one thread per worker, batches under AHEAD_MAX_BYTES), and
    returns a function that waits for them. Each answer is kept in the memo
    (answer_memo.py), where ask_with_deadline then finds it: only the speed
    changes (the same request, the same worker code, each under the same
    deadline from the one before, as ask_many says). What is not kept (a
    deadline passed, a failed worker: the rest of that batch is dropped) is
    asked again when needed, as without this."""
    todo: dict = {}
    for r in requests:
        key = _request_key(r)
        if key in todo or answer_memo.holds(key) or len(r["candidate"]) > MAX_CANDIDATE_CHARS:
            continue
        if len(json.dumps(r)) + 1 <= AHEAD_MAX_BYTES:  # a longer one is asked alone when needed
            todo[key] = r
    # A candidate text's requests stay in one group, mostly one batch: a worker parses a text once
    # (_parse_cached), and the parse is most of the cost (a benchmark's answer meets many tasks' answers).
    by_candidate: dict = {}
    for key, r in todo.items():
        by_candidate.setdefault(r["candidate"], []).append((key, r))
    groups: list[list] = [[] for _ in range(_POOL_SIZE["n"])]
    for same in sorted(by_candidate.values(), key=len, reverse=True):
        min(groups, key=len).extend(same)
    groups = [g for g in groups if g]

    def ask_group(group: list) -> None:
        batch, size = [], 0
        for item in group + [None]:
            n = 0 if item is None else len(json.dumps(item[1])) + 1
            if batch and (item is None or size + n > AHEAD_MAX_BYTES):
                w = _take()
                try:
                    answers = w.ask_many([r for _, r in batch], timeout_s)
                except Exception:
                    w.kill()
                    _give_back(None)
                    return
                for (key, _), answer in zip(batch, answers):
                    answer_memo.remember(key, answer)
                if len(answers) < len(batch) or answers[-1] is None:
                    w.kill()
                    _give_back(None)
                    return
                _give_back(w)
                batch, size = [], 0
            if item is not None:
                batch.append(item)
                size += n

    threads = [threading.Thread(target=ask_group, args=(g,), daemon=True) for g in groups]
    for t in threads:
        t.start()

    def wait() -> None:
        for t in threads:
            t.join()

    return wait


def all_answers_pass(answers: list[str], check) -> dict:
    """{"ok", "error"}: ok only when there is an answer and every one passes
    `check` (several distinct final answers must all be right)."""
    if not answers:
        return {"ok": False, "error": None}
    for a in answers:
        ans = check(a)
        if not ans["ok"]:
            return ans if ans.get("error") or len(answers) == 1 else {"ok": False, "error": "several_answers"}
    return {"ok": True, "error": None}


def _check_one(reference: str, answer: str, timeout_s: float) -> dict:
    if len(answer) > MAX_CANDIDATE_CHARS:
        return {"ok": False, "error": "answer_too_long"}
    refused = answer_form.refusal(answer, reference)  # not a value: never compared (answer_form.py)
    if refused:
        return {"ok": False, "error": refused}
    return ask_with_deadline(_math_request(reference, answer), timeout_s)


def verify_math(reference: str, completion: str, timeout_s: float = DEFAULT_TIMEOUT_S, prompt: str = "") -> dict:
    """passed, score, extracted_answer, error, verify_seconds for one attempt."""
    t0 = time.perf_counter()
    out = {"passed": False, "score": 0.0, "extracted_answer": None, "error": None, "verifier": "math"}
    try:
        answers, _rule = _final_answers(completion, prompt)
        out["extracted_answer"] = " | ".join(answers) if answers else None
        ans = all_answers_pass(answers, lambda a: _check_one(reference, a, timeout_s))
        out.update(passed=bool(ans["ok"]), score=1.0 if ans["ok"] else 0.0, error=ans.get("error"))
    except Exception as e:  # a verifier crash marks the attempt, never the run
        out["error"] = f"verifier_error: {type(e).__name__}"
    out["verify_seconds"] = time.perf_counter() - t0
    return out


def regex_with_deadline(pattern: str, candidate: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> dict:
    return ask_with_deadline({"op": "regex", "reference": pattern, "candidate": candidate}, timeout_s)
