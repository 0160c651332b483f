"""Verifiers behind one interface: (task, completion) -> verdict.

A verdict is a dict with passed, score (0..1), extracted_answer, error,
verifier and verify_seconds. A verifier never raises: a crash is recorded
in `error` and the attempt counts as not passed.

Domains without a verifier here (code, rubric) are not sampled at all: the
sampling stage drops them with reason `no_verifier` before any attempt is
paid for.
"""

from __future__ import annotations

import re
import time
from typing import Callable

from tasksieve.transforms.normalize import normalize_text
from tasksieve.transforms.verify_math import extract_final_answer, verify_math


def verify_exact(reference: str, completion: str) -> dict:
    """Normalised exact match of the extracted final answer; a reference
    written as /pattern/ is a regular expression matched in full."""
    t0 = time.perf_counter()
    candidate, _ = extract_final_answer(completion, math_only=False)
    out = {"passed": False, "score": 0.0, "extracted_answer": candidate, "error": None, "verifier": "exact"}
    try:
        if candidate is not None:
            if len(reference) > 2 and reference.startswith("/") and reference.endswith("/"):
                ok = re.fullmatch(reference[1:-1], candidate.strip()) is not None
            else:
                ok = normalize_text(candidate) == normalize_text(reference)
            out.update(passed=ok, score=1.0 if ok else 0.0)
    except re.error as e:
        out["error"] = f"reference regex is invalid: {e}"
    out["verify_seconds"] = time.perf_counter() - t0
    return out


_BY_DOMAIN: dict[str, Callable[[dict, str], dict]] = {
    "math": lambda task, completion: verify_math(task["answer"], completion),
    "exact": lambda task, completion: verify_exact(task["answer"], completion),
}


def verifier_for(domain: str) -> Callable[[dict, str], dict] | None:
    return _BY_DOMAIN.get(domain)
