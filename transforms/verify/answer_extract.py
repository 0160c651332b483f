"""Final-answer extraction for the `math` and `exact` verifiers: which text
of a completion is its final answer (rules in math_answers.py's docstring
and docs/verification.md). Linear regular expressions only; runs in the
calling process. Split out of math_answers.py, which re-exports it.
"""

from __future__ import annotations

import functools
import re
from itertools import islice

from tasksieve.transforms.verify import answer_form


# A longer candidate fails without being parsed (truncating it could turn it
# into another answer; math_answers.py). The deadline is what bounds the time.
MAX_CANDIDATE_CHARS = 200

_ANSWER_PHRASE = re.compile(r"(?:final answer|answer is|answer\s*:)\s*(?:is\s*)?[:=]?\s*", re.IGNORECASE)
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:/\d+)?")
_HAS_MATH = re.compile(r"\d|\\frac|\\sqrt|\\pi|\binfinity\b")
_RESULT = re.compile(r"(?:=|\bequals?\b|\bis equal to\b)\s*\$?\s*(-?\d[\d,]*(?:\.\d+)?(?:/\d+)?)")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
# Alternatives in one phrase answer: "41 or 42", "1, 2, 3", "3; 4". A comma
# before exactly three digits is a thousands separator, not a list.
_ALTERNATIVES = re.compile(r",(?!\d{3}(?!\d))|;|\bor\b|\band\b")
MAX_ANSWERS = 8


def _boxed_all(text: str) -> list[str]:
    """Every balanced \\boxed{...} in order (an unbalanced one is skipped)."""
    out, start = [], text.find("\\boxed")
    while start != -1 and len(out) <= MAX_ANSWERS:
        i = text.find("{", start)
        if i == -1:
            break
        depth, end = 0, None
        for j in range(i, len(text)):
            if text[j] == "{":
                depth += 1
            elif text[j] == "}":
                depth -= 1
                if depth == 0:
                    end = j
                    break
        if end is None:
            break
        if text[i + 1 : end].strip():
            out.append(text[i + 1 : end].strip())
        start = text.find("\\boxed", end)
    return out


def _number_key(n: str) -> str:
    n = n.replace(",", "")
    try:
        return repr(float(n)) if "/" not in n else n
    except ValueError:
        return n


def _split_alternatives(answer: str) -> list[str]:
    """Top-level alternatives of a phrase answer (inside brackets a comma is
    part of a tuple or set, not a list of guesses)."""
    if len(answer) > 4 * MAX_CANDIDATE_CHARS:
        return [answer]  # too long to be an answer at all: the verifier refuses it whole
    parts, depth, last, pos = [], 0, 0, 0
    for m in _ALTERNATIVES.finditer(answer):
        chunk = answer[pos : m.start()]
        depth += sum(chunk.count(c) for c in "([{") - sum(chunk.count(c) for c in ")]}")
        pos = m.start()
        if depth == 0:
            parts.append(answer[last : m.start()])
            last = m.end()
    parts.append(answer[last:])
    return [p.strip().strip("$").strip() for p in parts if p.strip().strip("$").strip()]


def _last_number_answer(completion: str, prompt: str) -> str | None:
    """Rule 3: the last sentence holding a number, if it holds one number or
    one equation result that the prompt does not state."""
    last = next((x for x in reversed(_SENTENCE_END.split(completion)) if x and _NUMBER.search(x)), None)
    if last is None:
        return None
    if answer_form.invisible_near_digit(last):
        return last.strip()  # kept whole, so that the check refuses it (answer_form.py)
    # Only "exactly one" matters, so at most two of each are read: a
    # sanity probe or a completion listing thousands of numbers costs the
    # same as one listing two (the verifier sanity check asks ~10 probes
    # of every task of a delivery).
    numbers = _first_two(_NUMBER.finditer(last), 0)
    if len(numbers) == 1:
        found = numbers[0]
    else:
        results = _first_two(_RESULT.finditer(last), 1)
        if len(results) != 1:
            return None
        found = results[0]
    return None if _number_key(found) in _stated_numbers(prompt or "") else found.replace(",", "")


def _first_two(matches, group: int) -> list[str]:
    return [m.group(group) for m in islice(matches, 2)]


@functools.lru_cache(maxsize=16)
def _stated_numbers(prompt: str) -> frozenset:
    """The numbers a prompt states, as _number_key: read once per task,
    not once per probe. A few tasks are checked at once (`[verify]
    parallel`), so a few prompts are enough; 16 prompts at the field limit
    (100,000 characters, ~18,500 numbers: 1.5 MiB each) hold ~25 MiB."""
    return frozenset(_number_key(n) for n in _NUMBER.findall(prompt))


def extract_final_answers(completion: str, prompt: str = "", math_only: bool = True) -> tuple[list[str], str]:
    """(the final answers, which rule found them); ([], "none") when there
    is none. With math_only=False (the `exact` verifier) a phrase answer may
    be plain words."""
    if not completion:
        return [], "empty"
    boxed = _boxed_all(completion)
    if boxed:
        return list(dict.fromkeys(boxed)), "boxed"
    phrases = []
    for m in _ANSWER_PHRASE.finditer(completion):
        tail = completion[m.end() :].strip()
        line = (tail.splitlines()[0] if tail else "").strip().rstrip(".").strip().strip("$").strip()
        # "the answer is straightforward" names no answer.
        if line and (not math_only or _HAS_MATH.search(line)):
            phrases += _split_alternatives(line)
    if phrases:
        return list(dict.fromkeys(phrases)), "phrase"
    found = _last_number_answer(completion, prompt)
    return ([found], "last_number") if found else ([], "none")


def extract_final_answer(completion: str, math_only: bool = True, prompt: str = "") -> tuple[str | None, str]:
    """(the single final answer or None, rule): None also when there are
    several."""
    answers, rule = extract_final_answers(completion, prompt, math_only)
    if len(answers) != 1:
        return None, rule if not answers else "several"
    return answers[0], rule
