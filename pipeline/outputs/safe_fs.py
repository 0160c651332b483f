"""Writing into a folder other people may share, as root, without being
steered by a link someone planted there.

Everything tasksieve writes, truncates or deletes in an output folder goes
through these helpers:
- a file is written to a fresh temporary name (mkstemp: O_CREAT|O_EXCL,
  which never follows a link) and renamed over its final name; rename(2)
  replaces a link that sits there, never its target;
- a folder tasksieve owns is used only when lstat() says it is a real
  folder; a link in its place is removed (the link, not its target);
- a file opened in place (the lock) is opened with O_NOFOLLOW and checked
  to be a plain file with one name (a planted hard link is not written);
- deletions look with lstat() first, and shutil.rmtree walks by file
  descriptor without following links inside.

`step()` marks each write of the output set, so that tests can stop or
kill a command at every one of them (tests/outputs/test_output_set_kill.py).
"""

from __future__ import annotations

import errno
import functools
import os
import shutil
import signal
import stat
import tempfile
from pathlib import Path

# --- the step hook (tests only) ------------------------------------------------

_steps = 0


def step(name: str) -> None:
    """A write of the output set is about to happen. With TASKSIEVE_STEP_LOG
    set, the step is appended to that file; TASKSIEVE_KILL_AT_STEP=N kills
    the process (SIGKILL) at step N, TASKSIEVE_STOP_AT_STEP=N (or `all`)
    stops it (SIGSTOP) there, so a test sees exactly what a kill would leave."""
    global _steps
    _steps += 1
    env = os.environ
    if not (env.get("TASKSIEVE_STEP_LOG") or env.get("TASKSIEVE_KILL_AT_STEP") or env.get("TASKSIEVE_STOP_AT_STEP")):
        return
    if env.get("TASKSIEVE_STEP_LOG"):
        with open(env["TASKSIEVE_STEP_LOG"], "a", encoding="utf-8") as fh:
            fh.write(f"{_steps} {name}\n")
    if env.get("TASKSIEVE_STOP_AT_STEP") in ("all", str(_steps)):
        os.kill(os.getpid(), signal.SIGSTOP)
    if env.get("TASKSIEVE_KILL_AT_STEP") == str(_steps):
        os.kill(os.getpid(), signal.SIGKILL)


# --- files -----------------------------------------------------------------------


def temp_path(folder: Path, name: str, suffix: str = ".tmp") -> Path:
    """A new, empty file in `folder` under a fresh private name (never a
    link's target): write it, then `os.replace` it over its final name."""
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=suffix, dir=folder)
    os.close(fd)
    return Path(tmp)


def write_atomic(path: Path, write) -> Path:
    """`write(tmp_path)` then rename over `path`: a reader sees the old file
    or the new one, and a link planted at `path` is replaced, not followed."""
    tmp = temp_path(path.parent, path.name)
    try:
        write(tmp)
        step(f"replace {path.name}")
        os.replace(tmp, path)
    finally:
        with _quiet():
            tmp.unlink()
    return path


def write_text_atomic(path: Path, text: str) -> Path:
    return write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_bytes_atomic(path: Path, data: bytes) -> Path:
    return write_atomic(path, lambda tmp: tmp.write_bytes(data))


def open_plain(path: Path, flags: int, mode: int = 0o644) -> int | None:
    """An fd for `path` if it is a plain file with one name (not a link, a
    FIFO, a device or a planted hard link), opened without following a
    link; None if it is something else."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR, errno.ENOTDIR):
            return None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        os.close(fd)
        return None
    os.set_blocking(fd, True)
    return fd


def open_lock_file(path: Path):
    """`path` opened for reading and writing, never through a link: a link,
    a FIFO, a device or a second name of another file planted there is
    replaced by a fresh file (rename(2) replaces the planted name, never its
    target)."""
    for _ in range(3):
        fd = open_plain(path, os.O_RDWR | os.O_CREAT)
        if fd is not None:
            return os.fdopen(fd, "r+", encoding="utf-8")
        if os.path.isdir(path) and not os.path.islink(path):
            raise OSError(errno.EISDIR, f"{path} is a folder")
        fresh = temp_path(path.parent, path.name, ".new")
        os.chmod(fresh, 0o644)  # others read who holds the folder
        os.replace(fresh, path)
    raise OSError(errno.EBUSY, f"{path} keeps changing")


def copy_plain(src: Path, dst: Path) -> bool:
    """Copy `src` to the new file `dst` if `src` is a plain file (never
    through a link); False if there was no plain file to copy."""
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        if e.errno in (errno.ENOENT, errno.ELOOP, errno.ENXIO, errno.EISDIR, errno.ENOTDIR):
            return False
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        out = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            with os.fdopen(os.dup(fd), "rb") as fin, os.fdopen(os.dup(out), "wb") as fout:
                shutil.copyfileobj(fin, fout, 1 << 20)
        finally:
            os.close(out)
    finally:
        os.close(fd)
    return True


def link_or_copy(src: Path, dst: Path) -> bool:
    """`dst` as a second name of the plain file `src` (outputs are never
    changed in place, only replaced, so generations may share them), or a
    copy where hard links are refused. False if `src` is not a plain file."""
    try:
        st = os.lstat(src)
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(st.st_mode):
        return False
    try:
        os.link(src, dst, follow_symlinks=False)
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.EMLINK, errno.EXDEV, errno.ENOTSUP, errno.EACCES):
            raise
        return copy_plain(src, dst)
    if not stat.S_ISREG(os.lstat(dst).st_mode):  # swapped for a link between the lstat and the link
        os.unlink(dst)
        return False
    return True


# --- folders -----------------------------------------------------------------


def is_real_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


class NotAFolder(OSError):
    """A name tasksieve keeps a folder under holds a file or something else."""

    def __str__(self) -> str:
        return str(self.strerror)


def others_can_write(st: os.stat_result) -> bool:
    """Whether a user other than this one may write where `st` was taken:
    it is writable by others, or by a group holding another user. A
    user's private group (what `umask 002` leaves folders writable by)
    holds only that user, so it does not count."""
    if st.st_mode & 0o002:
        return True
    return bool(st.st_mode & 0o020) and _group_has_others(st.st_gid)


@functools.lru_cache(maxsize=64)
def _group_has_others(gid: int) -> bool:
    """A member (listed, or by primary group) other than this user; an
    unknown group is taken to have one."""
    import grp
    import pwd

    try:
        members = set(grp.getgrgid(gid).gr_mem)
    except KeyError:
        return True
    members |= {p.pw_name for p in pwd.getpwall() if p.pw_gid == gid}
    try:
        members.discard(pwd.getpwuid(os.geteuid()).pw_name)
    except KeyError:
        pass
    return bool(members)


def real_subdir(parent: Path, name: str, mode: int = 0o755) -> Path:
    """parent/name as a real folder: created if missing; a link found there
    (to a folder, a file or nowhere) is removed, the link only, and a
    folder made in its place. A plain file there is not tasksieve's to
    delete: NotAFolder."""
    path = parent / name
    for _ in range(3):
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            try:
                os.mkdir(path, mode)
            except FileExistsError:
                continue
            return path
        if stat.S_ISDIR(st.st_mode):
            if st.st_uid != os.geteuid() or others_can_write(st):
                # Another user's folder (planted before the command): they could
                # rename what tasksieve makes in it and put a link in its place.
                raise NotAFolder(
                    errno.EPERM,
                    f"{path} is a folder another user owns or can write in; tasksieve keeps its own "
                    "folder there: remove it",
                )
            return path
        if stat.S_ISLNK(st.st_mode):
            step(f"unlink planted link {name}")
            with _quiet():
                os.unlink(path)
            continue
        raise NotAFolder(errno.ENOTDIR, f"{path} is a file, not a folder; tasksieve keeps a folder there")
    raise NotAFolder(errno.ENOTDIR, f"{path} keeps changing; tasksieve keeps a folder there")


def remove_entry(path: Path) -> None:
    """Delete what `path` names, never what a link there points to: a link
    or file is unlinked, a real folder removed without following links in it."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path, ignore_errors=True)  # fd-based: links inside are unlinked, not followed
    else:
        with _quiet():
            os.unlink(path)


class _quiet:
    """Ignore a missing file (cleanup that may have nothing to do)."""

    def __enter__(self):
        return self

    def __exit__(self, typ, value, tb):
        return typ is not None and issubclass(typ, FileNotFoundError)
