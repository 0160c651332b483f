"""The attempt cache: every generation a run pays for, persisted as it
finishes, keyed by (content_hash, model_id, sampler_key, attempt_idx).

Why: sampling is where the money goes. A run killed mid-way (a dead model
server, a pre-empted machine, Ctrl-C) and started again with the same
command re-uses every finished generation; a rerun of the same pool with the
same model and sampler re-uses them all. A new model version, or a change to
anything in `sampler_key`, shares nothing, so its attempts are all new.

Only generations are cached, not verdicts: verifying is cheap and re-done
each run, so a fixed verifier applies to old attempts too.

Layout of the cache folder (default OUT/attempt_cache):
    <run_id>-<pid>.jsonl   written while a run samples: one line per finished
                           generation, flushed at once (a killed process loses
                           at most a torn last line, which readers skip)
    <run_id>.parquet       written when the run finishes: every generation
                           the run paid for (its own, and those it adopted
                           from runs that never finished); its .jsonl go
    _finished/<run_id>     marker: this run's spend is in some run's costs

Cost rule, so no generation is paid twice: an attempt re-used from a
finished run costs nothing in the run that re-uses it (`reused_from_run`
says where it was paid); one re-used from a run that never finished is
charged to the run that finishes with it, which then owns it.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from pathlib import Path
from typing import Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from tasksieve.schemas.records import ATTEMPT_SCHEMA

# Key on a task dict carrying its cached generations into the sampling stage.
FINISHED_DIR = "_finished"

# A cached generation: the generation half of an Attempt (no verdict), and
# `run_id`, the run that paid for it.
CACHE_SCHEMA = pa.schema([ATTEMPT_SCHEMA.field(name) for name in (
    "content_hash", "model_id", "sampler_key", "attempt_idx", "seed", "completion", "prompt_tokens",
    "completion_tokens", "finish_reason", "gen_seconds", "error", "run_id")])


def cache_record(plan, request, result) -> dict:
    return {
        "content_hash": request.content_hash, "model_id": plan.model_id, "sampler_key": plan.sampler_key,
        "attempt_idx": request.attempt_idx, "seed": request.seed, "completion": result.completion,
        "prompt_tokens": result.prompt_tokens, "completion_tokens": result.completion_tokens,
        "finish_reason": result.finish_reason, "gen_seconds": result.gen_seconds, "error": result.error,
        "run_id": plan.run_id,
    }


class CacheWriter:
    """Appends generation records for one run from one process. Thread-safe:
    the OpenAI backend reports results from its request threads."""

    def __init__(self, cache_dir: str, run_id: str):
        Path(cache_dir).mkdir(parents=True, exist_ok=True)
        self.path = Path(cache_dir) / f"{run_id}-{os.getpid()}.jsonl"
        self._fh = open(self.path, "a", encoding="utf-8")
        self._lock = threading.Lock()

    def write(self, record: dict) -> None:
        line = json.dumps(record, ensure_ascii=False) + "\n"
        with self._lock:
            self._fh.write(line)
            self._fh.flush()  # in the OS now: survives a killed process

    def sync(self) -> None:
        with self._lock:
            self._fh.flush()
            os.fsync(self._fh.fileno())  # once per wave: survives a crashed machine

    def close(self) -> None:
        with self._lock:
            self._fh.close()


_WRITERS: dict[tuple[str, str], CacheWriter] = {}
_WRITERS_LOCK = threading.Lock()


def writer_for(cache_dir: str, run_id: str) -> CacheWriter:
    """One writer per (cache, run) per process, shared by its DoFn instances."""
    with _WRITERS_LOCK:
        key = (cache_dir, run_id)
        if key not in _WRITERS or _WRITERS[key]._fh.closed:
            _WRITERS[key] = CacheWriter(cache_dir, run_id)
        return _WRITERS[key]


def cache_files(cache_dir: str | None) -> list[str]:
    if not cache_dir or not Path(cache_dir).is_dir():
        return []
    return sorted(str(p) for p in Path(cache_dir).iterdir() if p.suffix in (".jsonl", ".parquet") and p.is_file())


def finished_runs(cache_dir: str | None) -> frozenset[str]:
    folder = Path(cache_dir or "") / FINISHED_DIR
    return frozenset(p.name for p in folder.iterdir()) if cache_dir and folder.is_dir() else frozenset()


def read_cache_file(path: str, model_id: str, sampler_key: str) -> Iterator[dict]:
    """The file's records for this model and sampler. Torn or foreign lines
    (a process killed mid-write) are skipped, never fatal."""
    if path.endswith(".parquet"):
        table = pq.read_table(path, schema=CACHE_SCHEMA)
        for rec in table.to_pylist():
            if rec["model_id"] == model_id and rec["sampler_key"] == sampler_key:
                yield rec
        return
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if (isinstance(rec, dict) and rec.get("model_id") == model_id and rec.get("sampler_key") == sampler_key
                    and isinstance(rec.get("attempt_idx"), int) and isinstance(rec.get("completion"), str)):
                yield {name: rec.get(name) for name in CACHE_SCHEMA.names}


def pick_cached(records, finished: frozenset[str]) -> list[dict]:
    """One record per attempt_idx: one from a finished run when there is one
    (that run owns the cost), else the first seen."""
    best: dict[int, dict] = {}
    for rec in records:
        cur = best.get(rec["attempt_idx"])
        if cur is None or (rec["run_id"] in finished and cur["run_id"] not in finished):
            best[rec["attempt_idx"]] = rec
    return [best[i] for i in sorted(best)]


def settle_run(cache_dir: str, run_id: str, attempts: pa.Table, finished: frozenset[str]) -> int:
    """After a run has finished: keep, as <run_id>.parquet, every generation
    it paid for (new, or adopted from an unfinished run), mark the run
    finished and remove its .jsonl shards. Returns the number kept."""
    folder = Path(cache_dir)
    folder.mkdir(parents=True, exist_ok=True)
    rows = [
        # An attempt's `error` may be the verifier's; only a generation that
        # itself failed (finish_reason 'error') keeps it in the cache.
        dict({name: a.get(name) for name in CACHE_SCHEMA.names}, run_id=run_id,
             error=a["error"] if a["finish_reason"] == "error" else None)
        for a in attempts.to_pylist()
        if a["run_id"] == run_id and (a.get("reused_from_run") is None or a["reused_from_run"] not in finished)
    ]
    if rows:
        tmp = folder / f".{run_id}.{uuid.uuid4().hex}.tmp"
        pq.write_table(pa.Table.from_pylist(rows, schema=CACHE_SCHEMA), tmp)
        os.replace(tmp, folder / f"{run_id}.parquet")
    (folder / FINISHED_DIR).mkdir(exist_ok=True)
    (folder / FINISHED_DIR / run_id).touch()
    for shard in folder.glob(f"{run_id}-*.jsonl"):
        shard.unlink()
    return len(rows)
