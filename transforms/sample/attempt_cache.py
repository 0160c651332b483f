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

Trust: every entry and every marker carries an HMAC under this user's key,
kept outside the cache folder (cache_auth.py). An entry that fails it
(planted, edited, moved from another task/model/seed/run, or in a file
renamed from another run's), an entry of an error, and a marker that fails
it are ignored with a one-line warning, and their attempts regenerated. A
cache file that cannot be read (a truncated Parquet file) is renamed aside
(`<name>.damaged-<hex>`) with a warning, and its attempts regenerated.

Cost rule, so no generation is paid twice: an attempt re-used from a
finished run costs nothing in the run that re-uses it (`reused_from_run`
says where it was paid); one re-used from a run that never finished is
charged to the run that finishes with it, which then owns it.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import uuid
from pathlib import Path
from typing import Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from tasksieve.schemas.records import ATTEMPT_SCHEMA
from tasksieve.transforms.sample.cache_auth import entry_mac, entry_ok, marker_mac, marker_ok

# Key on a task dict carrying its cached generations into the sampling stage.
FINISHED_DIR = "_finished"

# A cached generation: the generation half of an Attempt (no verdict), and
# `run_id`, the run that paid for it.
CACHE_SCHEMA = pa.schema(
    [
        ATTEMPT_SCHEMA.field(name)
        for name in (
            "content_hash",
            "model_id",
            "sampler_key",
            "attempt_idx",
            "seed",
            "completion",
            "prompt_tokens",
            "completion_tokens",
            "finish_reason",
            "gen_seconds",
            "error",
            "run_id",
        )
    ]
    + [pa.field("mac", pa.string())]
)
# What an entry's MAC covers: every field but the MAC.
SIGNED_FIELDS = [name for name in CACHE_SCHEMA.names if name != "mac"]
# A JSONL line longer than this is not an entry this code wrote; skipped unread.
MAX_LINE_BYTES = 64 * 2**20


def signed(rec: dict) -> dict:
    return dict(rec, mac=entry_mac(rec, SIGNED_FIELDS))


def _warn(message: str) -> None:
    print(f"tasksieve: warning: attempt cache: {message}", file=sys.stderr, flush=True)


def cache_record(plan, request, result) -> dict:
    return signed(
        {
            "content_hash": request.content_hash,
            "model_id": plan.model_id,
            "sampler_key": plan.sampler_key,
            "attempt_idx": request.attempt_idx,
            "seed": request.seed,
            "completion": result.completion,
            "prompt_tokens": result.prompt_tokens,
            "completion_tokens": result.completion_tokens,
            "finish_reason": result.finish_reason,
            "gen_seconds": result.gen_seconds,
            "error": result.error,
            "run_id": plan.run_id,
        }
    )


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
    # Links are not followed: a link planted in a shared folder could point anywhere.
    return sorted(
        str(p)
        for p in Path(cache_dir).iterdir()
        if p.suffix in (".jsonl", ".parquet") and not p.is_symlink() and p.is_file()
    )


def finished_runs(cache_dir: str | None) -> frozenset[str]:
    """Runs marked finished by a marker this user's tasksieve wrote; a
    planted or edited marker is ignored with a warning."""
    folder = Path(cache_dir or "") / FINISHED_DIR
    if not cache_dir or not folder.is_dir() or folder.is_symlink():
        return frozenset()
    good, bad = set(), []
    for p in folder.iterdir():
        if p.name.startswith("."):
            continue  # a marker being written
        try:
            content = p.read_bytes()[:200] if p.is_file() and not p.is_symlink() else b""
        except OSError:
            content = b""
        (good.add(p.name) if marker_ok(p.name, content) else bad.append(p.name))
    if bad:
        _warn(
            f"{len(bad)} marker(s) in {folder} fail their authentication check (planted or edited, e.g. "
            f"{bad[0][:80]!r}); ignored: those runs' attempts are charged again when re-used"
        )
    return frozenset(good)


def _file_run(path: str) -> str:
    """The run a cache file belongs to, by its name (<run>.parquet, <run>-<pid>.jsonl)."""
    stem = Path(path).stem
    return stem if path.endswith(".parquet") else stem.rsplit("-", 1)[0]


def _set_aside(path: str, why: str) -> None:
    aside = f"{path}.damaged-{uuid.uuid4().hex[:8]}"
    try:
        os.replace(path, aside)
        where = f"renamed to {Path(aside).name}"
    except OSError as e:
        where = f"could not be renamed aside ({e.strerror}); it is skipped"
    _warn(f"{path} cannot be read ({why}); {where}; its attempts are regenerated")


def _jsonl_entries(path: str) -> Iterator[object]:
    with open(path, "rb") as fh:
        while True:
            line = fh.readline(MAX_LINE_BYTES)
            if not line:
                return
            if not line.endswith(b"\n") and len(line) == MAX_LINE_BYTES:
                while line and not line.endswith(b"\n"):  # skip the rest of an over-long line unread
                    line = fh.readline(MAX_LINE_BYTES)
                yield None
                continue
            try:
                yield json.loads(line)
            except (ValueError, RecursionError):
                yield None  # a torn last line (a process killed mid-write), or garbage


def _raw_entries(path: str) -> Iterator[object]:
    if path.endswith(".parquet"):
        try:
            rows = pq.read_table(path).to_pylist()
        except Exception as e:  # truncated, not Parquet, another schema: never fatal
            _set_aside(path, f"{type(e).__name__}: {' '.join(str(e).split())[:120]}")
            return
        yield from rows
        return
    try:
        yield from _jsonl_entries(path)
    except OSError as e:
        _warn(f"{path} cannot be read ({e.strerror}); skipped, its attempts are regenerated")


def _usable(rec: dict, run: str) -> bool:
    return (
        isinstance(rec.get("attempt_idx"), int)
        and isinstance(rec.get("completion"), str)
        and isinstance(rec.get("seed"), int)
        and rec.get("run_id") == run
        # An error is never a generation (caches of older versions held some).
        and rec.get("error") is None
        and rec.get("finish_reason") not in ("error", "request_failed")
        and entry_ok(rec, SIGNED_FIELDS)
    )


def read_cache_file(path: str, model_id: str, sampler_key: str) -> Iterator[dict]:
    """The file's authenticated records for this model and sampler. Torn
    lines are skipped; entries that fail authentication are skipped with
    one warning per file; a file that cannot be read is set aside."""
    run, rejected = _file_run(path), 0
    for rec in _raw_entries(path):
        if not isinstance(rec, dict):
            continue
        if rec.get("model_id") != model_id or rec.get("sampler_key") != sampler_key:
            continue
        if not _usable(rec, run):
            rejected += 1
            continue
        yield {name: rec.get(name) for name in CACHE_SCHEMA.names}
    if rejected:
        _warn(
            f"{rejected} entr{'y' if rejected == 1 else 'ies'} in {path} fail the authentication check "
            "(planted, edited, moved from another task, model, seed or run, or written by an older tasksieve) "
            "or hold an error; ignored, their attempts are regenerated"
        )


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
        signed(dict({name: a.get(name) for name in SIGNED_FIELDS}, run_id=run_id, error=None))
        for a in attempts.to_pylist()
        if a["run_id"] == run_id
        and (a.get("reused_from_run") is None or a["reused_from_run"] not in finished)
        # Only generations: an attempt's `error` is the verifier's; a failed request never got here.
        and a["finish_reason"] not in ("error", "request_failed")
    ]
    if rows:
        tmp = folder / f".{run_id}.{uuid.uuid4().hex}.tmp"
        pq.write_table(pa.Table.from_pylist(rows, schema=CACHE_SCHEMA), tmp)
        os.replace(tmp, folder / f"{run_id}.parquet")
    (folder / FINISHED_DIR).mkdir(exist_ok=True)
    marker = folder / FINISHED_DIR / run_id
    tmp = folder / FINISHED_DIR / f".{run_id}.{uuid.uuid4().hex}.tmp"
    tmp.write_text(marker_mac(run_id) + "\n")
    os.replace(tmp, marker)
    for shard in folder.glob(f"{run_id}-*.jsonl"):
        shard.unlink()
    return len(rows)
