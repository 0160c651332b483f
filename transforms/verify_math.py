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
thread (Beam runs DoFns on worker threads), so they are switched off here and
the candidate is capped in length instead: sympy on a short string is fast.
"""

from __future__ import annotations

import logging
import re
import time

# We switch math-verify's signal-based timeouts off on purpose (see above);
# its warning about that on every call is noise.
logging.getLogger("math_verify").setLevel(logging.ERROR)

# Longer candidates are truncated before parsing: the answers this verifier
# judges are short, and sympy on long expressions can take unbounded time.
MAX_CANDIDATE_CHARS = 200

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


def verify_math(reference: str, completion: str) -> dict:
    """passed, score, extracted_answer, error, verify_seconds for one attempt."""
    from math_verify import verify

    t0 = time.perf_counter()
    out = {"passed": False, "score": 0.0, "extracted_answer": None, "error": None, "verifier": "math"}
    try:
        candidate, _rule = extract_final_answer(completion)
        out["extracted_answer"] = candidate
        if candidate is not None:
            gold = _parse(reference)
            if not gold:
                out["error"] = f"reference answer {reference[:60]!r} could not be parsed"
            else:
                pred = _parse(candidate)
                ok = bool(pred) and verify(gold, pred, timeout_seconds=None)
                out["passed"] = ok
                out["score"] = 1.0 if ok else 0.0
    except Exception as e:  # a verifier crash marks the attempt, never the run
        out["error"] = f"verifier crashed: {type(e).__name__}: {e}"[:500]
    out["verify_seconds"] = time.perf_counter() - t0
    return out
