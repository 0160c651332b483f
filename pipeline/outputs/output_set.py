"""The output set: every file of a command's outputs, made current at once.

    OUT/runs/<id>/            one finished output set (run, dedup or select):
                              learnable/results/attempts/quarantine/costs/
                              selected .parquet and curation.duckdb
    OUT/runs/<id>.XXXX.unfinished/
                              a set being written (or left by a command that
                              was killed): never current, removed by the
                              next command into OUT
    OUT/current -> runs/<id>  the commit record: one symlink, replaced with
                              rename(2), so it names the old set or the new
    OUT/results.parquet -> current/results.parquet   (and the other names)
                              what readers open; they resolve through
                              `current`, so every name shows the same set

A new set starts as the current one (its files hard-linked: outputs are
never changed in place, only replaced; the database copied, since DuckDB
appends to it), the command writes its files into it, and `commit()`
renames the folder to its final name and swaps `current`. A command killed
at any point leaves the previous set current and whole; readers never see
a mix. History is kept as before: the new set's curation.duckdb is the
previous one with this command's rows appended. The set `current` replaced
is kept (a reader may be in the middle of it); older ones are removed.
"""

from __future__ import annotations

import os
import re
import secrets
import stat
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from tasksieve.pipeline.outputs.safe_fs import (
    copy_plain,
    is_real_dir,
    link_or_copy,
    others_can_write,
    real_subdir,
    remove_entry,
    step,
)

RUNS = "runs"
CURRENT = "current"
UNFINISHED = ".unfinished"
DB = "curation.duckdb"
# The files of a set, each shown in OUT as a link through `current`.
SET_FILES = (
    "learnable.parquet",
    "results.parquet",
    "attempts.parquet",
    "quarantine.parquet",
    "costs.parquet",
    "selected.parquet",
    DB,
)
# Copied, not linked, into a new set: the command appends to them.
_COPIED = (DB, DB + ".wal")
_SET_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,200}")


def current_set(out: Path) -> Path | None:
    """The set `OUT/current` names, if it is one tasksieve made: a link to
    runs/<name>, a real folder. Anything else (a planted link, a dangling
    one) is not a set."""
    try:
        target = os.readlink(out / CURRENT)
    except OSError:
        return None
    head, _, name = target.partition("/")
    if head != RUNS or not _SET_NAME.fullmatch(name) or name.endswith(UNFINISHED):
        return None
    if not is_real_dir(out / RUNS) or not is_real_dir(out / RUNS / name):
        return None
    return out / RUNS / name


def visible(out: Path, name: str) -> Path:
    """Where tasksieve itself reads OUT/name: in the current set when there
    is one (a link planted at OUT/name is not followed), else OUT/name."""
    cur = current_set(out)
    return cur / name if cur is not None and os.path.lexists(cur / name) else out / name


def _place_link(out: Path, name: str, target: str) -> None:
    """OUT/name as a link to `target`, whatever was there (a planted link is
    replaced, not followed; rename(2) makes the change atomic)."""
    try:
        if os.readlink(out / name) == target:
            return
    except OSError:
        pass
    for _ in range(10):
        tmp = out / f".{name}.{secrets.token_hex(6)}.link"
        try:
            os.symlink(target, tmp)
            break
        except FileExistsError:
            continue
    step(f"link {name}")
    try:
        os.replace(tmp, out / name)
    except BaseException:
        remove_entry(tmp)
        raise


def _set_id(prefix: str) -> str:
    return f"{prefix}-{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(3)}"


class OutputSet:
    """One command's new output set, written under a staging name. Use as a
    context manager under OUT's lock: on an exception the unfinished set is
    removed and the previous one stays current; `commit()` makes it current."""

    def __init__(self, out: Path, set_id: str, copy_db: bool = True):
        if not _SET_NAME.fullmatch(set_id):
            set_id = _set_id("set")
        self.out, self.set_id, self.copy_db = out, set_id, copy_db
        self.dir: Path | None = None
        self.previous: Path | None = None
        self.committed: Path | None = None

    def __enter__(self) -> "OutputSet":
        runs = real_subdir(self.out, RUNS)
        for entry in os.listdir(runs):  # what killed commands left: never current
            if entry.endswith(UNFINISHED):
                step(f"remove unfinished {entry}")
                remove_entry(runs / entry)
        self.previous = current_set(self.out) or self._adopt_loose_files(runs)
        step("create unfinished set")
        self.dir = Path(tempfile.mkdtemp(prefix=f"{self.set_id}.", suffix=UNFINISHED, dir=runs))
        os.chmod(self.dir, 0o755)  # readers of a shared OUT read the set once it is current
        if self.previous is not None:
            self._carry(self.previous)
        return self

    def __exit__(self, typ, value, tb) -> bool:
        if typ is not None and self.committed is None and self.dir is not None:
            remove_entry(self.dir)
        return False

    def path(self, name: str) -> Path:
        return self.dir / name

    def _carry(self, previous: Path) -> None:
        """The current set's files into the new one: linked, or copied for
        the files this command appends to."""
        for name in SET_FILES + (DB + ".wal",):
            step(f"carry {name}")
            if name in _COPIED:
                if self.copy_db:
                    copy_plain(previous / name, self.dir / name)
            else:
                link_or_copy(previous / name, self.dir / name)

    def _adopt_loose_files(self, runs: Path) -> Path | None:
        """A folder written before output sets existed holds its outputs as
        plain files: they become a set of their own (hard links, nothing
        copied), made current, then each plain file is replaced by its link
        (same content), so no reader sees a mix."""
        loose = [n for n in SET_FILES + (DB + ".wal",) if _own_plain_file(self.out / n)]
        if not loose:
            return None
        step("create unfinished set (earlier files)")
        tmp = Path(tempfile.mkdtemp(prefix="earlier.", suffix=UNFINISHED, dir=runs))
        os.chmod(tmp, 0o755)
        for name in loose:
            step(f"adopt {name}")
            link_or_copy(self.out / name, tmp / name)
        final = runs / _set_id("earlier")
        step("rename earlier set")
        os.rename(tmp, final)
        self._point(final, set())
        return final

    def commit(self) -> Path:
        """Make the new set current: its final name, then one rename of the
        `current` link. Returns the set's folder."""
        runs = self.out / RUNS
        final = runs / self.set_id
        if os.path.lexists(final):
            final = runs / _set_id(self.set_id[:40])
        step("rename set to its final name")
        os.rename(self.dir, final)
        self.committed, self.dir = final, final
        self._point(final, {self.previous} if self.previous else set())
        return final

    def _point(self, final: Path, keep: set) -> None:
        present = {n for n in SET_FILES if os.path.lexists(final / n)}
        plain = {n for n in present if _plain_file(self.out / n)}
        # Links for the new set's names first: through the old `current`
        # they show the old set's file, or none where it had none. A plain
        # file (a folder of an earlier version, adopted: the same file as
        # in the set) is replaced only once `current` names the set.
        for name in sorted(present - plain):
            _place_link(self.out, name, f"{CURRENT}/{name}")
        _place_link(self.out, CURRENT, f"{RUNS}/{final.name}")  # the commit
        for name in sorted(plain):
            _place_link(self.out, name, f"{CURRENT}/{name}")
        for name in SET_FILES + (DB + ".wal",):
            if name not in present and os.path.lexists(self.out / name) and not _plain_file(self.out / name):
                step(f"unlink {name}")
                remove_entry(self.out / name)  # a link to nothing now, or a planted one (DuckDB would
                # write its WAL through OUT/curation.duckdb.wal when someone opens the database to write)
        runs = self.out / RUNS
        for entry in os.listdir(runs):
            path = runs / entry
            if path != final and path not in keep and not entry.endswith(UNFINISHED):
                step(f"remove superseded set {entry}")
                remove_entry(path)


def _plain_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _own_plain_file(path: Path) -> bool:
    """A plain file this user wrote (one name, not writable by others): only
    such a file is adopted as an earlier version's output, never one planted
    by another user."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and st.st_nlink == 1 and not others_can_write(st)


def unfinished_sets(out: Path) -> list[str]:
    """Sets a killed command left (a warning names them)."""
    runs = out / RUNS
    if not is_real_dir(runs):
        return []
    return sorted(e for e in os.listdir(runs) if e.endswith(UNFINISHED))
