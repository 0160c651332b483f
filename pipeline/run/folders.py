"""Checks of the folders a run reads and writes, before anything runs: the
inputs and the output folder (not a system or home folder, not inside an
input, not someone else's, writable), and the lock that keeps two commands
out of one output folder. Each refusal is one line (RunError/UsageError)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from tasksieve.pipeline.outputs.out_guard import (
    Refused,
    refuse_dangerous,
    refuse_foreign_folder,
    refuse_shared_folder,
    reraise_disk_full,
)
from tasksieve.pipeline.outputs.safe_fs import open_lock_file
from tasksieve.pipeline.run.errors import RunError, UsageError
from tasksieve.transforms.read import expand_inputs


def refuse_inside_inputs(path: str | Path | None, inputs: list[str], flag: str) -> None:
    """A folder tasksieve writes (--out, --attempt-cache, --save-index) must not
    lie inside an --input folder: a later run would read what it wrote there
    as deliveries."""
    if not path:
        return
    real = Path(os.path.realpath(path))
    for raw in inputs:
        real_in = Path(os.path.realpath(raw))
        if real_in.is_dir() and _inside(real, real_in):
            raise UsageError(
                f"{flag} {path} is inside the --input folder {raw}: a later run would read what is "
                f"written there as deliveries; choose a folder outside the inputs"
            )


def inputs_and_output(inputs: list[str], out_dir: str) -> tuple[list[str], Path]:
    """The input files and the created output folder, or a one-line RunError.
    An --out inside an --input folder is refused: the next run would read
    this run's outputs as deliveries."""
    try:
        paths = expand_inputs(inputs)
    except Exception as e:  # a path given that cannot be read as given: usage, like `validate`'s
        raise UsageError(str(e)) from None
    out = Path(out_dir)
    refuse_inside_inputs(out, inputs, "--out")
    refuse_unsafe_folder(out, "--out")
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file, not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise RunError(f"cannot create output folder {out}: {e.strerror or e}") from None
    return paths, out


OUT_LOCK = ".tasksieve.lock"


def refuse_unsafe_folder(path: str | Path | None, flag: str) -> None:
    """`/`, a system folder or a home folder (as given or resolved), and a
    folder another user can write in or above which one can
    (out_guard.refuse_shared_folder), is never written into: a usage error
    (exit 2)."""
    if path:
        try:
            refuse_dangerous(path, flag)
            refuse_shared_folder(path, flag)
        except Refused as e:
            raise UsageError(str(e)) from None


def refuse_foreign(out: Path, force: bool) -> None:
    """A non-empty folder holding no tasksieve run needs --force. Checked
    before the lock is taken, so a refused folder is left as it was; a
    folder nothing can be written in says so first (an unnamed temporary
    file proves it without leaving one)."""
    try:
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as e:
        reraise_disk_full(e)
        raise RunError(f"output folder {out} is not writable: {e.strerror or e}") from None
    try:
        refuse_foreign_folder(out, force)
    except Refused as e:
        raise UsageError(str(e)) from None


@contextlib.contextmanager
def hold_output(out: Path, command: str):
    """Own OUT for the whole command: an exclusive lock on OUT/.tasksieve.lock,
    taken before any work. A second command into the same folder refuses at
    once (RunError, one line) instead of racing this one for its files. The
    lock is the kernel's (flock): a killed command releases it. A folder
    another user could write in is refused first (UsageError, exit 2)."""
    try:
        refuse_shared_folder(out)
    except Refused as e:
        raise UsageError(str(e)) from None
    try:
        fh = open_lock_file(out / OUT_LOCK)
    except OSError as e:
        reraise_disk_full(e)
        raise RunError(f"output folder {out} is not writable: {e.strerror or e}") from None
    try:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = " ".join(fh.read(200).split()) or "another tasksieve command"
            raise RunError(
                f"output folder {out} is in use by {holder}; wait for it to finish or choose another --out"
            ) from None
        except OSError as e:
            raise RunError(f"cannot lock output folder {out}: {e.strerror or e}") from None
        try:
            fh.seek(0)
            fh.truncate()
            fh.write(
                f"tasksieve {command} (pid {os.getpid()}, since "
                f"{datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M:%SZ')})\n"
            )
            fh.flush()
        except OSError as e:
            reraise_disk_full(e)
            raise RunError(f"output folder {out} is not writable: {e.strerror or e}") from None
        yield out
    finally:
        fh.close()  # releases the lock


def check_writable_folder(path: Path, what: str) -> None:
    """Create `path` if needed and prove a file can be written in it."""
    if path.exists() and not path.is_dir():
        raise UsageError(f"{what} {path} is a file, not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as e:
        reraise_disk_full(e)
        raise RunError(f"{what} {path} is not a writable folder: {e.strerror or e}") from None


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents
