"""Stage `normalize+hash`: fold away differences that do not change a task,
then hash what remains.

Normal form: Unicode NFKC (full-width digits, ligatures, non-breaking spaces
become their plain forms), case folded, every run of whitespace one space,
no space before closing punctuation or after opening brackets. The hash is
over the normalised prompt and the normalised reference (answer for
math/exact, tests for code, criteria for rubric), so two vendors who write
the same problem with different spacing or capitals get the same hash.
"""

from __future__ import annotations

import hashlib
import unicodedata


_CLOSING = ".,;:!?%)]}"
_OPENING = "([{"


def normalize_text(text: str | None) -> str:
    """The normal form. Written with str methods, not regular expressions
    (3x faster; it runs several times per task): `split()` breaks on exactly
    the characters `\\s` matches, and once every whitespace run is one space,
    removing " )" or "( " pairs is what the regexes `\\s+([.,;:!?%)\\]}])`
    and `([(\\[{])\\s+` did (tests/batch/test_batch_dedup.py compares both forms
    on random text, since content hashes saved in pool indexes depend on it)."""
    if not text:
        return ""
    t = unicodedata.normalize("NFKC", text).casefold()
    # Already single-spaced (most prompts) when no space leads, trails or
    # doubles and no other whitespace is there: every character split()
    # breaks on but " " is unprintable (checked over all of Unicode in
    # tests/batch/test_batch_dedup.py). Skips split+join, most of the cost.
    if not (t.isprintable() and "  " not in t and t[:1] != " " and t[-1:] != " "):
        t = " ".join(t.split())
    if " " in t:
        for c in _CLOSING:
            if c in t:
                t = t.replace(" " + c, c)
        for c in _OPENING:
            if c in t:
                t = t.replace(c + " ", c)
    return t


def reference_text(task: dict) -> str:
    if task["domain"] == "code":
        return task.get("tests") or ""
    if task["domain"] == "rubric":
        return "\n".join(task.get("rubric") or [])
    return task.get("answer") or ""


def content_hash(task: dict) -> str:
    """128-bit hex digest of the normalised prompt and reference."""
    return _digest(normalize_text(task["prompt"]), task)


def _digest(prompt_text: str, task: dict) -> str:
    payload = prompt_text + "\x1f" + normalize_text(reference_text(task))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]


def hashed_with_text(task: dict) -> tuple[dict, str]:
    """(the task with its content_hash, its normalised prompt): the batch
    path carries the prompt's normal form on to the near-dedup stages,
    which compare exactly that text (minhash.text_of), instead of
    normalising it twice more."""
    text = normalize_text(task["prompt"])
    return dict(task, content_hash=_digest(text, task), template_group=_template(task)), text


def with_hash(task: dict) -> dict:
    return dict(task, content_hash=content_hash(task), template_group=_template(task))


def _template(task: dict) -> str:
    """The task's template group (same_problem/template.py)."""
    from tasksieve.transforms.same_problem.template import template_group

    return template_group(task["prompt"])
