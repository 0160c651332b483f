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
import re
import unicodedata

import apache_beam as beam

_WS = re.compile(r"\s+")
_SPACE_BEFORE_CLOSE = re.compile(r"\s+([.,;:!?%)\]}])")
_SPACE_AFTER_OPEN = re.compile(r"([(\[{])\s+")


def normalize_text(text: str | None) -> str:
    if not text:
        return ""
    t = unicodedata.normalize("NFKC", text).casefold()
    t = _WS.sub(" ", t).strip()
    t = _SPACE_BEFORE_CLOSE.sub(r"\1", t)
    return _SPACE_AFTER_OPEN.sub(r"\1", t)


def reference_text(task: dict) -> str:
    if task["domain"] == "code":
        return task.get("tests") or ""
    if task["domain"] == "rubric":
        return "\n".join(task.get("rubric") or [])
    return task.get("answer") or ""


def content_hash(task: dict) -> str:
    """128-bit hex digest of the normalised prompt and reference."""
    payload = normalize_text(task["prompt"]) + "\x1f" + normalize_text(reference_text(task))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]


def with_hash(task: dict) -> dict:
    return dict(task, content_hash=content_hash(task))


class NormalizeAndHash(beam.PTransform):
    def expand(self, tasks):
        return tasks | "Hash" >> beam.Map(with_hash)
