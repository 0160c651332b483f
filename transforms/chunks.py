"""Chunks: how the batch path (pipeline/cheap_batch.py) moves tasks between
its stages: one Beam element per few thousand tasks, pickled once.

Why pickled: Beam's coder walks every field of every row at each stage
boundary, which cost more than the stages themselves at 100k tasks; a
pickled list crosses as one bytes value.

Why spilled: the in-process runner keeps every PCollection between stages
in memory, so a 1M-task pool would sit in RAM several times over. With a
`Spill`, a packed value is written to a file in a private folder and only
its path crosses the runner; the page cache, not the process, holds it.
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
import uuid
from dataclasses import dataclass, field


class SpillTampered(RuntimeError):
    """A spill file whose HMAC does not match: not written by this run."""


@dataclass(frozen=True)
class Spill:
    """Where packed values go (a private folder) and the run's HMAC key."""

    folder: str
    key: bytes = field(repr=False)

    def write(self, blob: bytes) -> str:
        path = os.path.join(self.folder, f"{uuid.uuid4().hex}.pkl")
        with open(path, "xb") as fh:  # x: never follow or reuse a planted file
            fh.write(hmac.digest(self.key, blob, hashlib.sha256))
            fh.write(blob)
        return path

    def read(self, path: str) -> bytes:
        with open(path, "rb") as fh:
            data = fh.read()
        mac, blob = data[:32], data[32:]
        if not hmac.compare_digest(mac, hmac.digest(self.key, blob, hashlib.sha256)):
            raise SpillTampered(f"spill file {path} was not written by this run; refusing to read it")
        return blob


@contextlib.contextmanager
def spill_folder(parent: str | None = None):
    """A Spill in a new private folder (mode 0700) under `parent` (default:
    the system temporary folder), removed with everything in it on exit."""
    folder = tempfile.mkdtemp(prefix="tasksieve-spill-", dir=parent)
    try:
        yield Spill(folder, secrets.token_bytes(32))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def pack(value, spill: Spill | None = None):
    """Pickled `value`: the bytes, or with a Spill the path of the file holding them."""
    blob = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    return blob if spill is None else (spill.write(blob), spill)


def unpack(packed):
    """The value `pack` packed. Bytes only ever come from this process's
    pipeline; files only after their HMAC checks."""
    if isinstance(packed, tuple):
        path, spill = packed
        return pickle.loads(spill.read(path))
    return pickle.loads(packed)


def as_chunk(rows: list, spill: Spill | None = None) -> tuple:
    """A chunk: (row count, packed rows). The count lets progress bars count
    without unpacking."""
    return len(rows), pack(rows, spill)


def rows_of(chunk: tuple) -> list:
    return unpack(chunk[1])
