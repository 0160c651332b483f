"""Chunks: how the batch path (pipeline/cheap_batch.py) moves tasks between
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
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
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

    def _mac(self, name: str, offset: int, blob: bytes) -> bytes:
        where = f"{name}:{offset}:".encode()
        return hmac.new(self.key, where + blob, hashlib.sha256).digest()

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
        data = memoryview(len(blob).to_bytes(8, "little") + self._mac(name, offset, blob) + blob)
        while data:  # a raw write may be short
            data = data[fh.write(data):]
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


def _close_files(folder: str) -> None:
    with _open_lock:
        for fh, _ in _open_files.pop(folder, {}).values():
            fh.close()


@contextlib.contextmanager
def spill_folder(parent: str | None = None):
    """A Spill in a new private folder (mode 0700) under `parent` (default:
    the system temporary folder), removed with everything in it on exit."""
    folder = tempfile.mkdtemp(prefix="tasksieve-spill-", dir=parent)
    try:
        yield Spill(folder, secrets.token_bytes(32))
    finally:
        _close_files(folder)
        shutil.rmtree(folder, ignore_errors=True)


def pack(value, spill: Spill | None = None):
    """Pickled `value`: the bytes, or with a Spill (file, offset, spill) of where they are."""
    blob = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    return blob if spill is None else (*spill.write(blob), spill)


def unpack(packed):
    """The value `pack` packed. Bytes only ever come from this process's
    pipeline; files only after their HMAC checks."""
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
