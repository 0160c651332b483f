"""The parent's side of a case's processes: reading the verdict line under a
deadline, and ending a sandbox's whole process group. Beam-free, stdlib only."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time


def read_verdict(fd: int, deadline_s: float) -> tuple[bytes | None, bool]:
    buf = b""
    end = time.monotonic() + deadline_s
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while b"\n" not in buf:
            left = end - time.monotonic()
            if left <= 0:
                return None, True
            if not sel.select(timeout=left):
                continue
            chunk = os.read(fd, 65536)
            if not chunk or len(buf) > 1 << 16:
                return None, False
            buf += chunk
    return buf.partition(b"\n")[0], False


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the process group, reap its leader, and wait until no member
    is left, so no process of a case outlives its verdict."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    end = time.monotonic() + 5
    while live_members(proc.pid) and time.monotonic() < end:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.01)


def live_members(pgid: int) -> bool:
    """Does any process of group `pgid` still run? Zombies do not: they wait
    for the host's init to reap them, which can take a second."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != b"Z":
            return True
    return False


def tail(path: str, n: int = 2000) -> str:
    with open(path, "rb") as fh:
        fh.seek(max(0, os.path.getsize(path) - n))
        return fh.read().decode("utf-8", "replace")
