"""Verifier `math`: is the attempt's final answer equivalent to the reference?

Answer extraction, in order (the first that finds something wins):
1. the last `\\boxed{...}` (balanced braces), as the prompt asks;
2. the text after the last "final answer", "answer is" or "answer:", when
   it holds a number or a math expression ("the answer is straightforward"
   does not count);
3. the result of the last equation: the number after the last "=",
   "equals" or "is equal to" (small models write "4 + 4 = 8" and then
   ramble on without boxing anything);
4. the last number in the completion.
The extracted text and the reference are parsed and compared by
math-verify (symbolic equivalence: 1/2 == 0.5, 12 == 12.0, sets, intervals).

math-verify's own timeouts use signal.alarm, which fails outside the main
thread (Beam runs DoFns on worker threads), so they are switched off and the
caller enforces the limit: parsing and comparison run in a small pool of
worker processes (`_MathWorker`), and one that overruns its deadline is
killed and replaced. A length cap alone is not enough: the 21 characters
`\\boxed{9^{9^{9^{9}}}}` keep sympy busy for minutes (measured: over 20 s,
then stopped). Extraction (regular expressions) stays in process.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import queue
import re
import selectors
import subprocess
import sys
import threading
import time

# We switch math-verify's signal-based timeouts off on purpose (see above);
# its warning about that on every call is noise.
logging.getLogger("math_verify").setLevel(logging.ERROR)

# Longer candidates are truncated before parsing: the answers this verifier
# judges are short. The deadline below is what bounds the time.
MAX_CANDIDATE_CHARS = 200
DEFAULT_TIMEOUT_S = 5.0
# Workers at once (threads beyond this wait for a free one); see configure().
_POOL_SIZE = {"n": 2}
# Address space of a worker: sympy on a hostile power tower allocates without end.
WORKER_MEMORY_BYTES = 2 * 2**30
STARTUP_TIMEOUT_S = 120.0

_ANSWER_PHRASE = re.compile(r"(?:final answer|answer is|answer\s*:)\s*(?:is\s*)?[:=]?\s*", re.IGNORECASE)
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:/\d+)?")
_HAS_MATH = re.compile(r"\d|\\frac|\\sqrt|\\pi|\binfinity\b")
# The result of the last equation: "... = 12", "which equals 12".
_RESULT = re.compile(r"(?:=|\bequals?\b|\bis equal to\b)\s*\$?\s*(-?\d[\d,]*(?:\.\d+)?(?:/\d+)?)")


def _last_boxed(text: str) -> str | None:
    start = text.rfind("\\boxed")
    while start != -1:
        i = text.find("{", start)
        if i == -1:
            return None
        depth = 0
        for j in range(i, len(text)):
            if text[j] == "{":
                depth += 1
            elif text[j] == "}":
                depth -= 1
                if depth == 0:
                    return text[i + 1 : j].strip()
        start = text.rfind("\\boxed", 0, start)  # unbalanced: try an earlier one
    return None


def extract_final_answer(completion: str, math_only: bool = True) -> tuple[str | None, str]:
    """(answer text or None, which rule found it). With math_only=False (the
    `exact` verifier) a phrase answer may be plain words."""
    if not completion:
        return None, "empty"
    boxed = _last_boxed(completion)
    if boxed:
        return boxed, "boxed"
    matches = list(_ANSWER_PHRASE.finditer(completion))
    if matches:
        tail = completion[matches[-1].end():].strip()
        first_line = tail.splitlines()[0].strip() if tail else ""
        first_line = first_line.rstrip(".").strip().strip("$").strip()
        # "the answer is straightforward" names no answer: keep looking.
        if first_line and (not math_only or _HAS_MATH.search(first_line)):
            return first_line, "phrase"
    results = _RESULT.findall(completion)
    if results:
        return results[-1].replace(",", ""), "last_result"
    numbers = _NUMBER.findall(completion)
    if numbers:
        return numbers[-1].replace(",", ""), "last_number"
    return None, "none"


def _parse(text: str):
    from math_verify import parse

    text = text[:MAX_CANDIDATE_CHARS]
    # Wrap in $...$ so bare numbers and LaTeX both go through LaTeX extraction;
    # the plain form is tried too, for expressions like "3/4".
    parsed = parse(f"${text}$", parsing_timeout=None)
    return parsed or parse(text, parsing_timeout=None)


def equivalent(reference: str, candidate: str) -> dict:
    """{"ok": bool, "error": str|None}: math-verify, its timeouts off. Runs
    inside a worker process (see _serve); unbounded in time on its own."""
    from math_verify import verify

    gold = _parse(reference)
    if not gold:
        return {"ok": False, "error": f"reference answer {reference[:60]!r} could not be parsed"}
    pred = _parse(candidate)
    return {"ok": bool(pred) and bool(verify(gold, pred, timeout_seconds=None)), "error": None}


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
            ans = equivalent(req["reference"], req["candidate"])
        except MemoryError:
            ans = {"ok": False, "error": "math-verify ran out of memory"}
        except Exception as e:  # a parse crash marks the attempt, never the worker
            ans = {"ok": False, "error": f"verifier crashed: {type(e).__name__}: {e}"[:500]}
        out.write(json.dumps(ans) + "\n")
        out.flush()


class _MathWorker:
    """One worker process; used by one thread at a time."""

    def __init__(self):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from tasksieve.transforms.verify_math import _serve; _serve()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
        self.buf = b""
        if self._line(STARTUP_TIMEOUT_S) != b"ready":
            self.kill()
            raise RuntimeError("math worker did not start")

    def ask(self, reference: str, candidate: str, timeout_s: float) -> dict | None:
        """The answer, or None when the deadline passed (the caller kills us)."""
        self.proc.stdin.write((json.dumps({"reference": reference, "candidate": candidate}) + "\n").encode())
        self.proc.stdin.flush()
        line = self._line(timeout_s)
        return None if line is None else json.loads(line)

    def _line(self, timeout_s: float) -> bytes | None:
        end = time.monotonic() + timeout_s
        fd = self.proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self.buf:
                left = end - time.monotonic()
                if left <= 0 or not sel.select(timeout=left):
                    return None
                chunk = os.read(fd, 65536)
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


def _equivalent_with_deadline(reference: str, candidate: str, timeout_s: float) -> dict:
    w = _take()
    try:
        ans = w.ask(reference, candidate, timeout_s)
    except Exception as e:
        w.kill()
        _give_back(None)
        return {"ok": False, "error": f"verifier crashed: math worker failed ({type(e).__name__}: {e})"[:500]}
    if ans is None:
        w.kill()
        _give_back(None)
        return {"ok": False, "error": f"timeout (math-verify over {timeout_s:g}s)"}
    _give_back(w)
    return ans


def verify_math(reference: str, completion: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> dict:
    """passed, score, extracted_answer, error, verify_seconds for one attempt."""
    t0 = time.perf_counter()
    out = {"passed": False, "score": 0.0, "extracted_answer": None, "error": None, "verifier": "math"}
    try:
        candidate, _rule = extract_final_answer(completion)
        out["extracted_answer"] = candidate
        if candidate is not None:
            ans = _equivalent_with_deadline(reference, candidate[:MAX_CANDIDATE_CHARS], timeout_s)
            out["passed"] = bool(ans["ok"])
            out["score"] = 1.0 if ans["ok"] else 0.0
            out["error"] = ans.get("error")
    except Exception as e:  # a verifier crash marks the attempt, never the run
        out["error"] = f"verifier crashed: {type(e).__name__}: {e}"[:500]
    out["verify_seconds"] = time.perf_counter() - t0
    return out
