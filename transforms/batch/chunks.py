"""Chunks: how the batch path (transforms/batch/stages.py) moves tasks between
its stages: one Beam element per few thousand tasks, pickled once.

Why pickled: Beam's coder walks every field of every row at each stage
boundary, which cost more than the stages themselves at 100k tasks; a
pickled list crosses as one bytes value.

Why spilled: the in-process runner keeps every PCollection between stages
in memory, so a 1M-task pool would sit in RAM several times over. With a
`Spill`, a packed value is appended to a file in a private folder and only
(file, offset) crosses the runner; the page cache, not the process, holds it.
Each file carries an HMAC under a key made for the run, checked before
unpickling, so a file planted or altered in the folder is refused rather
than executed (unpickling runs code).

Why held: on the in-process runner every stage runs in this one process,
so pickling a value only to unpickle it in the same process is pure cost
(bench/README.md, "Measured design choices"). A Spill with a `memory_bytes` budget keeps packed
values as the objects themselves, in a table of this process, while their
estimated size stays under it; past the budget it spills as above, so
memory stays bounded on any pool. A held value is handed out once:
reading it takes it out of the table.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import itertools
import os
import pickle
import secrets
import shutil
import tempfile
import threading
import uuid
from dataclasses import dataclass, field


class SpillTampered(RuntimeError):
    """A spill file whose HMAC does not match: not written by this run."""


_HEADER = 8 + 32  # blob length, HMAC-SHA256
_open_files: dict = {}  # folder -> {thread id: [file, next offset]}: one append-only file per writing thread
_open_lock = threading.Lock()
_held: dict = {}  # folder -> {token: (value, estimated bytes)}: values kept as objects (Spill.memory_bytes)
_held_bytes: dict = {}  # folder -> estimated bytes held now
ROW_BYTES = 1536  # a task row as Python objects (a dict of ~20 fields, a short prompt): the budget's estimate
_tokens = itertools.count()


@dataclass(frozen=True)
class Spill:
    """Where packed values go (a private folder) and the run's HMAC key.

    Each writing thread appends to one file of its own, and a packed value
    is (file, offset): creating a file costs ~1 ms on the disks measured
    (bench/README.md), and a 100k-task run packs ~5,000 values, most of
    them small. The HMAC covers the file name and offset with the blob, so
    a blob cannot be moved within or between files either."""

    folder: str
    key: bytes = field(repr=False)
    # Estimated bytes of packed values kept as objects in this process (not
    # pickled) at any one time; 0: every value is spilled. Only for runners
    # that run every stage in the process that packed it (execute.run_graph).
    memory_bytes: int = 0

    def _mac(self, name: str, offset: int, blob) -> bytes:
        # Fed in two parts, not as one concatenation: the same MAC, without
        # a copy of the blob (at 1M tasks GBs of blobs, each copy into
        # freshly mapped pages).
        mac = hmac.new(self.key, f"{name}:{offset}:".encode(), hashlib.sha256)
        mac.update(blob)
        return mac.digest()

    def write(self, blob: bytes) -> tuple[str, int]:
        with _open_lock:
            mine = _open_files.setdefault(self.folder, {})
            slot = mine.get(threading.get_ident())
            if slot is None:
                path = os.path.join(self.folder, f"{uuid.uuid4().hex}.spill")
                # x: never follow or reuse a planted file; unbuffered, so a
                # reader in another thread or process sees every byte at once.
                slot = mine[threading.get_ident()] = [open(path, "xb", buffering=0), 0]
        fh, offset = slot
        name = os.path.basename(fh.name)
        # The header and the blob as two writes, not one concatenation (a copy).
        for data in (memoryview(len(blob).to_bytes(8, "little") + self._mac(name, offset, blob)), memoryview(blob)):
            while data:  # a raw write may be short
                data = data[fh.write(data) :]
        slot[1] = offset + _HEADER + len(blob)
        return fh.name, offset

    def read(self, path: str, offset: int) -> bytes:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            fh.seek(offset)
            head = fh.read(_HEADER)
            length = int.from_bytes(head[:8], "little")
            whole = len(head) == _HEADER and offset + _HEADER + length <= size
            blob = fh.read(length) if whole else b""
        if not whole or not hmac.compare_digest(head[8:], self._mac(os.path.basename(path), offset, blob)):
            raise SpillTampered(f"spill file {path} at {offset} was not written by this run; refusing to read it")
        return blob


class Held:
    """A packed value kept as the object itself in this process (Spill.memory_bytes)."""

    __slots__ = ("folder", "token")

    def __init__(self, folder: str, token: int):
        self.folder, self.token = folder, token

    def __reduce__(self):  # Beam's coders pickle it: two plain fields
        return Held, (self.folder, self.token)


def _estimate(value) -> int:
    """Bytes a packed value holds, roughly, for the memory budget: an
    array its buffer, a list or dict ROW_BYTES per item, a tuple its parts."""
    if isinstance(value, tuple):
        return sum(_estimate(v) for v in value)
    if isinstance(value, (str, bytes)):
        return len(value)
    nbytes = getattr(value, "nbytes", None)
    if isinstance(nbytes, int):
        return nbytes
    if isinstance(value, (list, dict)):
        return len(value) * ROW_BYTES
    return 64


def _holds_rows(value) -> bool:
    return isinstance(value, list) or (isinstance(value, tuple) and any(isinstance(v, list) for v in value))


def _hold(value, spill: Spill) -> Held | None:
    # Rows (lists of dicts and tuples) are what pickling is slow for; arrays
    # pickle as one copy of their buffer. So arrays may take only half the
    # budget: on a pool too large to hold whole, the rows are held first.
    n = _estimate(value)
    limit = spill.memory_bytes if _holds_rows(value) else spill.memory_bytes // 2
    with _open_lock:
        held = _held_bytes.get(spill.folder, 0)
        if held + n > limit:
            return None
        token = next(_tokens)
        _held.setdefault(spill.folder, {})[token] = (value, n)
        _held_bytes[spill.folder] = held + n
    return Held(spill.folder, token)


def _take(held: Held):
    with _open_lock:
        value, n = _held.get(held.folder, {}).pop(held.token, (None, None))
        if n is None:
            raise RuntimeError(
                "a value held in memory was read twice, after its run, or in another process; "
                "memory_bytes must be 0 on runners with more than one process"
            )
        _held_bytes[held.folder] -= n
    return value


def _close_files(folder: str) -> None:
    with _open_lock:
        _held.pop(folder, None)
        _held_bytes.pop(folder, None)
        for fh, _ in _open_files.pop(folder, {}).values():
            fh.close()


@contextlib.contextmanager
def spill_folder(parent: str | None = None, memory_bytes: int = 0):
    """A Spill in a new private folder (mode 0700) under `parent` (default:
    the system temporary folder), removed with everything in it on exit;
    values of up to `memory_bytes` in all are held as objects instead (Spill)."""
    folder = tempfile.mkdtemp(prefix="tasksieve-spill-", dir=parent)
    try:
        yield Spill(folder, secrets.token_bytes(32), memory_bytes)
    finally:
        _close_files(folder)
        shutil.rmtree(folder, ignore_errors=True)


def pack(value, spill: Spill | None = None):
    """Pickled `value`: the bytes, or with a Spill (file, offset, spill) of
    where they are; or, within the Spill's memory budget, a Held handle of
    the value itself. The packer must not change `value` afterwards."""
    if spill is not None and spill.memory_bytes:
        held = _hold(value, spill)
        if held is not None:
            return held
    blob = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    return blob if spill is None else (*spill.write(blob), spill)


def unpack(packed):
    """The value `pack` packed. Bytes only ever come from this process's
    pipeline; files only after their HMAC checks; a held value once."""
    if isinstance(packed, Held):
        return _take(packed)
    if isinstance(packed, tuple):
        path, offset, spill = packed
        return pickle.loads(spill.read(path, offset))
    return pickle.loads(packed)


def as_chunk(rows: list, spill: Spill | None = None) -> tuple:
    """A chunk: (row count, packed rows). The count lets progress bars count
    without unpacking."""
    return len(rows), pack(rows, spill)


def rows_of(chunk: tuple) -> list:
    return unpack(chunk[1])


def unchanged(chunk: tuple, rows: list, spill: Spill | None) -> tuple:
    """`chunk` passed on after rows_of(chunk) gave `rows`, none changed:
    pickled bytes or a spilled blob can be read again as they are; a held
    value was taken by reading it, so its rows are held anew (no copy)."""
    return as_chunk(rows, spill) if isinstance(chunk[1], Held) else chunk
