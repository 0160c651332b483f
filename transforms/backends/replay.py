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

All recorded completions are held in memory: replay is meant for pools
whose rollouts fit one worker (a million attempts of 1 KB each is ~1 GB).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from tasksieve.transforms.backends.base import NOT_RECORDED, REPLAY_PREFIX, GenRequest, GenResult, ModelLoadError, OnResult
from tasksieve.transforms.normalize import content_hash
from tasksieve.transforms.read import expand_inputs, read_source

_MAX_ROW_BYTES = 64 * 2**20


def _hash_of(rec: dict) -> str | None:
    if rec.get("content_hash"):
        return str(rec["content_hash"])
    if rec.get("prompt"):
        return content_hash({"domain": rec.get("domain") or "math", **rec})
    return None


def load_recorded(paths: list[str]) -> tuple[dict[str, list[dict]], int]:
    """({content_hash: [recorded attempt, ...] in attempt order}, rows
    skipped for having no completion or no way to match a task)."""
    by_hash: dict[str, list[tuple]] = defaultdict(list)
    skipped = 0
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
            idx = rec.get("attempt_idx")
            order = (idx if isinstance(idx, int) else 1 << 62, path, raw["line"])
            by_hash[h].append((order, dict(rec, _file=Path(path).name)))
    return {h: [rec for _, rec in sorted(rows, key=lambda r: r[0])] for h, rows in by_hash.items()}, skipped


class ReplayBackend:
    # A record cannot judge a rubric attempt: configure [judge] for those.
    can_judge = False

    def __init__(self, paths: list[str], model_id: str):
        self.model_id = model_id
        self.recorded, self.skipped = load_recorded(paths)
        if not self.recorded:
            raise ModelLoadError(f"replay: no usable recorded attempts in {paths} "
                                 "(rows need a completion and a content_hash or prompt)")

    def _one(self, req: GenRequest) -> GenResult:
        rows = self.recorded.get(req.content_hash or "", [])
        if req.attempt_idx is None or req.attempt_idx >= len(rows):
            return GenResult("", 0, 0, NOT_RECORDED, 0.0, error="no recorded attempt")
        rec = rows[req.attempt_idx]
        return GenResult(
            completion=rec["completion"],
            prompt_tokens=int(rec.get("prompt_tokens") or 0),
            completion_tokens=int(rec.get("completion_tokens") or 0),
            finish_reason=str(rec.get("finish_reason") or "replayed"),
            gen_seconds=float(rec.get("gen_seconds") or 0.0),
            origin=REPLAY_PREFIX + str(rec.get("run_id") or rec.get("_file")),
        )

    def generate(self, requests: list[GenRequest], on_result: OnResult | None = None) -> list[GenResult]:
        # No on_result: nothing here was generated, so there is nothing to
        # persist in the attempt cache.
        return [self._one(r) for r in requests]
