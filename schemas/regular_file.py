"""Opening a file only when it is a regular one: a FIFO, a device, a socket
or anything under /proc, /sys or /dev is refused before a byte is read.
Used for config, rates and profile files (schemas/toml_files.py) and for
every delivery file (transforms/sources/guard.py, which adds the reading
budgets). SourceRefused's message is a quarantine reason: keep it one line."""

from __future__ import annotations

import os
import stat

# Pseudo-filesystems whose files are endless, blocking or change as read:
# never a delivery, even as a link from inside an input folder.
SPECIAL_ROOTS = ("/proc/", "/sys/", "/dev/")
ORDINARY_UNDER_SPECIAL = ("/dev/shm/",)  # a RAM disk of ordinary files


class SourceRefused(Exception):
    """A source not read at all; the message is the quarantine reason."""


def kind_of(st: os.stat_result) -> str:
    mode = st.st_mode
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def special_reason(path) -> str | None:
    """Why a path is never read, if it resolves into /proc, /sys or /dev
    (their files look regular but are endless, block, or change as read)."""
    real = os.path.realpath(path)
    if (real + "/").startswith(ORDINARY_UNDER_SPECIAL):
        return None
    for root in SPECIAL_ROOTS:
        if (real + "/").startswith(root):
            return f"a special file under {root.rstrip('/')} ({real}), not a delivery file"
    return None


def open_regular(path: str):
    """A binary file object for a regular file; anything else is refused
    before a byte is read (a FIFO or device opened by name never blocks:
    O_NONBLOCK, then checked)."""
    why = special_reason(path)
    if why:
        raise SourceRefused(why)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SourceRefused(f"{kind_of(st)}, not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
