"""Checks a source before any of its rows is read: a reading budget set by
the file's size on disk, and validation of what the file says about itself.

Why: a file's own metadata says how much work reading it is (a Parquet
footer's row counts and column sizes, a compressed stream's expansion, an
Arrow stream's buffer lengths and offsets), and a hostile or damaged file
can claim anything: a 1 KB Parquet file whose footer declares a million
rows, a 50 KB .gz that expands to gigabytes, an Arrow file whose offsets
point past its buffers (reading it crashed the process with SIGSEGV).
So every source gets a verdict before it is read (`verdict`):

- its work must fit a budget proportional to its size: at most
  `MAX_ROWS_PER_BYTE` rows per byte on disk (or `FREE_ROWS`), and at most
  `MAX_EXPANSION` decoded bytes per byte on disk (or `FREE_BYTES`);
- what it declares must be true: row counts equal to the rows decoded,
  column chunks inside the file, Arrow data that passes pyarrow's full
  validation (offsets, lengths, dictionary indices) before any value is
  touched, datasets folders whose files are plain files inside them.

A source that fails is refused as a whole: the reader yields one error row
naming why and `count_rows` counts one row, so the run's accounting holds
and the file costs one quarantine line, not a million. The verdict is
cached per file identity, so the count and the read agree and the check
runs once per process.
"""

from __future__ import annotations

import os
import stat
import threading
from dataclasses import dataclass

from tasksieve.schemas.regular_file import SourceRefused

# Rows a source may hold per byte of its file. A real task row takes more
# than a byte even compressed (a 1M-row templated Parquet file with zstd:
# 2.75 bytes a row; ids alone 0.73); a footer claiming 1,000 rows a byte is
# lying, or describes rows that are all the same.
MAX_ROWS_PER_BYTE = 4
FREE_ROWS = 10_000  # a small file may hold this many rows whatever its size
# Decoded (decompressed, dictionary-expanded) bytes per byte on disk. Text
# compresses 3-20x; gzip cannot exceed ~1,030x, but bz2 and xz bombs reach
# millions, and a Parquet dictionary can repeat one huge value per row.
MAX_EXPANSION = 200
FREE_BYTES = 32 << 20  # a small file may decode to this much whatever its size
MAX_META_BYTES = 1 << 20  # a datasets folder's state.json / dataset_dict.json


@dataclass(frozen=True)
class Budget:
    rows: int
    bytes: int


def budget_for(size: int) -> Budget:
    return Budget(max(FREE_ROWS, size * MAX_ROWS_PER_BYTE), max(FREE_BYTES, size * MAX_EXPANSION))


class Capped:
    """A binary reader that gives at most `limit` bytes, then raises
    SourceRefused(`why`) if more was there: a decompressed stream past its
    budget, or a file that grew while it was read."""

    def __init__(self, inner, limit: int, why, size: int = 0, compressed: bool = False):
        self.inner, self.left, self.why = inner, limit, why
        self.size, self.compressed = size, compressed  # of the file on disk

    def read(self, n: int = -1) -> bytes:
        want = self.left + 1 if n is None or n < 0 else min(n, self.left + 1)
        data = self.inner.read(want)
        if len(data) > self.left:
            raise SourceRefused(self.why())
        self.left -= len(data)
        return data

    def close(self) -> None:
        self.inner.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _size_text(n: int) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:,} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1000
    return f"{n:,.1f} GB"  # pragma: no cover


def expansion_reason(what: str, size: int, budget: Budget) -> str:
    return (
        f"{what} over {_size_text(budget.bytes)} ({budget.bytes // max(size, 1):,}x its {_size_text(size)} on "
        f"disk; the limit is {MAX_EXPANSION}x or {_size_text(FREE_BYTES)}): a decompression bomb or a corrupt "
        "file; it is not read"
    )


def rows_reason(declared: int, size: int, budget: Budget, what: str = "declares") -> str:
    return (
        f"the file {what} {declared:,} rows in {_size_text(size)} (at most {MAX_ROWS_PER_BYTE} rows a byte or "
        f"{FREE_ROWS:,} are read): its metadata is corrupt or it is a decompression bomb; it is not read"
    )


# --- verdicts, cached per file identity ------------------------------------------------------

_verdicts: dict = {}
_lock = threading.Lock()
_MAX_CACHED = 4096


def _identity(path: str):
    """What names one version of a source: its real path and, for a file,
    device, inode, size and mtime (a datasets folder: its files' too)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    key = [os.path.realpath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]
    if stat.S_ISDIR(st.st_mode):
        try:
            for root, dirs, files in os.walk(path):
                dirs.sort()
                for name in sorted(files):
                    try:
                        s = os.stat(os.path.join(root, name))
                    except OSError:
                        continue
                    key.append((name, s.st_ino, s.st_size, s.st_mtime_ns))
        except OSError:
            return None
    return tuple(key)


def verdict(path: str, check) -> tuple[str | None, int | None]:
    """(the error of a refused source, or None; rows the source holds if the check counted
    them) for `path`, by `check(path) -> rows or None` (which raises
    SourceRefused or anything else for a source not to be read), cached."""
    key = _identity(path)
    if key is not None:
        with _lock:
            if key in _verdicts:
                return _verdicts[key]
    try:
        result = (None, check(path))
    except SourceRefused as e:
        result = (f"file not read: {e}", None)
    except MemoryError:
        result = ("file not read: it needs more memory to read than this machine has", None)
    except Exception as e:  # a file the libraries cannot parse at all
        result = (f"cannot read file: {type(e).__name__}: {' '.join(str(e).split())[:150]}", None)
    if key is not None:
        with _lock:
            if len(_verdicts) >= _MAX_CACHED:
                _verdicts.clear()
            _verdicts[key] = result
    return result
