"""The `replay` backend: attempts recorded elsewhere (a previous run's
attempts.parquet, a vendor's rollouts), served back instead of sampled, so
pass rates come out of the pipeline without paying for generation.

Recorded rows are matched to tasks by `content_hash`. A row without one but
with the task's `prompt` (and `domain` plus `answer`/`tests`/`rubric`) is
hashed the way the pipeline hashes tasks. A task's recorded attempts are
served in `attempt_idx` order (file order where there is none); when they run
out, the request is answered `NOT_RECORDED` and the task gets no more
attempts. Completions are verified again by this run's verifiers, so a
verifier fix applies to old rollouts too.

A recorded row that cannot be an attempt (a completion that is not text or
holds a lone surrogate, or is over MAX_COMPLETION_CHARS; a token count or
`gen_seconds` that is not a number, such as `prompt_tokens = "12 tokens"`)
is quarantined alone: skipped, counted, and named in one warning line with
the first reason; the file's other rows are served.

All recorded completions are held in memory: replay is meant for pools
whose rollouts fit one worker (a million attempts of 1 KB each is ~1 GB).
"""

from __future__ import annotations

import math
import sys
from collections import defaultdict
from pathlib import Path

from tasksieve.transforms.backends.base import (
    NOT_RECORDED,
    REPLAY_PREFIX,
    GenRequest,
    GenResult,
    ModelLoadError,
    OnResult,
)
from tasksieve.transforms.normalize import content_hash
from tasksieve.transforms.read import expand_inputs, read_source

_MAX_ROW_BYTES = 64 * 2**20
MAX_COMPLETION_CHARS = 1_000_000


def _hash_of(rec: dict) -> str | None:
    if rec.get("content_hash"):
        return str(rec["content_hash"])
    if rec.get("prompt"):
        return content_hash({"domain": rec.get("domain") or "math", **rec})
    return None


def _count(rec: dict, name: str) -> int:
    value = rec.get(name)
    if value is None:
        return 0
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not (0 <= value < 2**40)
        or value != int(value)
    ):
        raise ValueError(f"{name} is {str(value)[:40]!r}, not a count")
    return int(value)


def _seconds(rec: dict) -> float:
    value = rec.get("gen_seconds")
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"gen_seconds is {str(value)[:40]!r}, not a number of seconds")
    return float(value)


def _text(value) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def clean_record(rec: dict) -> dict:
    """The recorded attempt with its fields checked and typed; ValueError
    (one line) for a row that cannot be an attempt."""
    completion = rec.get("completion")
    if not isinstance(completion, str):
        raise ValueError("completion is not text")
    if not _text(completion):
        raise ValueError("completion holds a lone surrogate (e.g. \\ud800), which is not valid text")
    if len(completion) > MAX_COMPLETION_CHARS:
        raise ValueError(f"completion is {len(completion):,} characters, over the {MAX_COMPLETION_CHARS:,} cap")
    reason = rec.get("finish_reason")
    origin = str(rec.get("run_id") or rec.get("_file"))
    return dict(
        rec,
        prompt_tokens=_count(rec, "prompt_tokens"),
        completion_tokens=_count(rec, "completion_tokens"),
        gen_seconds=_seconds(rec),
        finish_reason=reason[:40] if isinstance(reason, str) and reason and _text(reason) else "replayed",
        _origin=origin.encode("utf-8", "replace").decode("utf-8")[:200],
    )


def load_recorded(paths: list[str]) -> tuple[dict[str, list[dict]], int]:
    """({content_hash: [recorded attempt, ...] in attempt order}, rows
    skipped for having no completion, no way to match a task, or a field
    that cannot be an attempt's)."""
    by_hash: dict[str, list[tuple]] = defaultdict(list)
    skipped, first_why = 0, None
    try:
        files = expand_inputs(paths)
    except Exception as e:
        raise ModelLoadError(f"replay: {e}") from None
    for path in files:
        for raw in read_source(path, _MAX_ROW_BYTES):
            rec = raw["record"]
            h = _hash_of(rec) if rec else None
            if h is None or not isinstance(rec.get("completion"), str):
                skipped += 1
                continue
            try:
                rec = clean_record(rec)
            except ValueError as e:
                skipped += 1
                first_why = first_why or f"{Path(path).name} line {raw.get('line')}: {e}"
                continue
            idx = rec.get("attempt_idx")
            order = (idx if isinstance(idx, int) else 1 << 62, path, raw["line"])
            by_hash[h].append((order, dict(rec, _file=Path(path).name)))
    if first_why:
        print(
            f"tasksieve: warning: replay: {skipped} recorded row(s) skipped (first that cannot be an attempt: "
            f"{first_why})",
            file=sys.stderr,
            flush=True,
        )
    return {h: [rec for _, rec in sorted(rows, key=lambda r: r[0])] for h, rows in by_hash.items()}, skipped


class ReplayBackend:
    # A record cannot judge a rubric attempt: configure [judge] for those.
    can_judge = False

    def __init__(self, paths: list[str], model_id: str):
        self.model_id = model_id
        self.recorded, self.skipped = load_recorded(paths)
        if not self.recorded:
            raise ModelLoadError(
                f"replay: no usable recorded attempts in {paths} (rows need a completion and a content_hash or prompt)"
            )

    def _one(self, req: GenRequest) -> GenResult:
        rows = self.recorded.get(req.content_hash or "", [])
        if req.attempt_idx is None or req.attempt_idx >= len(rows):
            return GenResult("", 0, 0, NOT_RECORDED, 0.0, error="no recorded attempt")
        rec = rows[req.attempt_idx]
        return GenResult(
            completion=rec["completion"],
            prompt_tokens=rec["prompt_tokens"],
            completion_tokens=rec["completion_tokens"],
            finish_reason=rec["finish_reason"],
            gen_seconds=rec["gen_seconds"],
            origin=REPLAY_PREFIX + rec["_origin"],
        )

    def generate(self, requests: list[GenRequest], on_result: OnResult | None = None) -> list[GenResult]:
        # No on_result: nothing here was generated, so there is nothing to
        # persist in the attempt cache.
        return [self._one(r) for r in requests]
