"""Staged outputs: the pipeline's PCollections written as Arrow IPC files
(shards) that `finalize.finalize` reads back, sorts and loads. Arrow IPC,
not Parquet: a staged file is read once, by this run, and writing it
uncompressed and unencoded took half the time (bench/README.md).

Not `beam.io.WriteToParquet`: under Beam 2.77's DaskRunner its files come
out empty (checked with a ten-row pipeline). Here each shard is a keyed
group written by one plain function with pyarrow, under a deterministic
name, written to a temporary file and renamed: a retried bundle rewrites
the same shard instead of adding a second copy, on every runner.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import tempfile
from pathlib import Path

import apache_beam as beam
import pyarrow as pa

from tasksieve.pipeline.outputs.safe_fs import is_real_dir, real_subdir, remove_entry
from tasksieve.schemas.records import conform

SHARDS = 4
SUFFIX = ".arrow"  # what finalize.read_staged reads back


def _write_ipc(table: pa.Table, path: Path) -> None:
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)


def shard_of(row: dict, n: int) -> int:
    # A stable hash of the row's content: the same row lands in the same
    # shard on every worker and every retry (Python's hash() is salted).
    key = repr(sorted((k, str(v)) for k, v in row.items())).encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=4).digest(), "big") % n


def _replace(path: Path, write) -> str:
    """Write through a temporary file, then rename: readers never see a
    half-written file, and a retry simply replaces it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    write(tmp)
    os.replace(tmp, path)
    return str(path)


def write_shard(kv, folder: str, schema: pa.Schema) -> str:
    shard, rows = kv
    table = pa.Table.from_pylist([conform(r, schema) for r in rows], schema=schema)
    return _replace(Path(folder) / f"shard-{shard:05d}{SUFFIX}", lambda tmp: _write_ipc(table, tmp))


_NAME_KEYS = ("source", "task_id", "component", "line")


def chunk_name(table: pa.Table) -> str:
    """A name for a chunk, from its rows' keys (those of _NAME_KEYS it has
    as columns): a retried chunk gets its own name again; no two chunks
    share one. The key columns go in as one Arrow IPC stream, lengths and
    offsets included, so no value can pass for two; reading the keys from
    every row dict again cost as much as building the table (~2 s at 1M
    rows, whose dicts lie all over the heap)."""
    keys = table.select([k for k in _NAME_KEYS if k in table.column_names])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, keys.schema) as writer:
        writer.write_table(keys)
    return f"chunk-{hashlib.blake2b(sink.getvalue(), digest_size=12).hexdigest()}"


def chunk_table(rows: list, schema: pa.Schema, same: dict | None = None) -> pa.Table:
    """Rows as a table with `schema`'s columns. `same`: columns whose value
    every row takes (over any the rows hold), set as whole columns instead
    of a copy of every row with them."""
    # from_pylist with a schema takes the schema's fields and ignores the
    # rest, as conform() does, without a copy of every row.
    table = pa.Table.from_pylist(rows, schema=schema)
    for col, value in (same or {}).items():
        i = schema.get_field_index(col)
        table = table.set_column(i, schema.field(i), pa.repeat(pa.scalar(value, schema.field(i).type), len(rows)))
    return table


def write_table(table: pa.Table, folder: str, name: str) -> str:
    """One chunk's table as one file, `name`: a retried chunk rewrites its own file."""
    return _replace(Path(folder) / f"{name}{SUFFIX}", lambda tmp: _write_ipc(table, tmp))


class WriteStaged(beam.PTransform):
    """Rows in; paths of the shard files written out."""

    def __init__(self, folder: str, schema: pa.Schema, shards: int = SHARDS):
        super().__init__()
        self.folder, self.schema, self.shards = folder, schema, shards

    def expand(self, rows):
        n = self.shards
        return (
            rows
            | "Shard" >> beam.Map(lambda r: (shard_of(r, n), r))
            | "GroupShard" >> beam.GroupByKey()
            | "WriteShard" >> beam.Map(write_shard, self.folder, self.schema)
        )


LOCK_FILE = ".lock"


def _held_by_a_live_run(folder: Path) -> bool:
    """Whether a live run holds `folder`'s lock. The lock file is opened
    without following a link and never created: a folder without one is a
    dead run's."""
    try:
        fd = os.open(folder / LOCK_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
    return False


@contextlib.contextmanager
def claimed_staging(out: Path, prefix: str = "run"):
    """A fresh private folder OUT/_staging/<prefix>-XXXX (mkdtemp: a name
    nobody could have planted), locked for as long as the run lives.
    Staging folders that nobody holds are what killed runs left behind:
    they are removed first (their finished attempts live on in the attempt
    cache). A folder another live run holds is left alone. A link planted
    as OUT/_staging, or inside it, is removed as a link: nothing is deleted
    through it."""
    root = real_subdir(out, "_staging")
    for name in os.listdir(root):
        old = root / name
        if is_real_dir(old) and _held_by_a_live_run(old):
            continue  # a live run
        remove_entry(old)
    staging = Path(tempfile.mkdtemp(prefix=f"{prefix}-", dir=root))
    fd = os.open(staging / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield staging
    finally:
        # A run that staged nothing (it failed in pre-flight) leaves no
        # trace; one that stopped mid-way leaves its folder to the next run,
        # which removes it (finished attempts are in the attempt cache).
        with contextlib.suppress(OSError):
            if os.listdir(staging) == [LOCK_FILE]:
                remove_entry(staging)
        os.close(fd)
        with contextlib.suppress(OSError):
            os.rmdir(root)  # only when empty: no other run is staging there
