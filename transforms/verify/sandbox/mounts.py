"""Where and as whom a sandboxed process runs: the uid it drops to when
we are root, whether that uid can reach an interpreter, and bubblewrap's
command line (the read-only mounts, the private /tmp, the namespaces and
the capabilities it keeps). Host side, stdlib only (runner.py uses it)."""

from __future__ import annotations

import os
import pwd
import stat
import sys
from pathlib import Path

PYTHON = os.path.realpath(sys.executable)
NOBODY = "nobody"


def nobody_ids() -> tuple[int, int] | None:
    """(uid, gid) to drop to when we are root; None when we are not."""
    if os.geteuid() != 0:
        return None
    try:
        pw = pwd.getpwnam(NOBODY)
        return pw.pw_uid, pw.pw_gid
    except KeyError:
        return 65534, 65534


def world_reachable(path: str) -> bool:
    """Can a user with no special rights read (and run) `path`?"""
    p = Path(os.path.realpath(path))
    try:
        for parent in reversed(p.parents):
            if not os.stat(parent).st_mode & stat.S_IXOTH:
                return False
        mode = os.stat(p).st_mode
        return bool(mode & stat.S_IROTH) and (stat.S_ISDIR(mode) or bool(mode & stat.S_IXOTH))
    except OSError:
        return False


def bind_args() -> list[str]:
    """bwrap mounts: /usr and the library folders (as links where they are
    links), and the interpreter's prefix, all read-only at their own paths
    (the interpreter's run path is absolute)."""
    out = ["--ro-bind", "/usr", "/usr"]
    for top in ("/lib", "/lib64", "/lib32", "/libx32", "/bin"):
        if os.path.islink(top):
            out += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            out += ["--ro-bind", top, top]
    prefixes = {os.path.realpath(sys.base_prefix), os.path.dirname(os.path.dirname(PYTHON))}
    for pre in sorted(prefixes):
        if pre != "/usr" and not pre.startswith("/usr/"):
            # Parents made 0755 first: bwrap would copy the host's modes (/root is 0700).
            for parent in reversed(Path(pre).parents[:-1]):
                out += ["--perms", "0755", "--dir", str(parent)]
            out += ["--ro-bind", pre, pre]
    return out


def bwrap_prefix(tmpfs_bytes: int) -> list[str]:
    # No --new-session: the whole sandbox stays in the process group (and
    # session) it is started in, so one killpg ends all of it; that session
    # has no terminal, which is what --new-session protects.
    common = [
        "--die-with-parent",
        "--clearenv",
        *bind_args(),
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        # bwrap's /dev is a tmpfs owned by the sandbox's user when not root (/dev, /dev/shm writable):
        # without Landlock a pooled case could leave files there for the next (the worker wipes /tmp).
        "--remount-ro",
        "/dev",
        "--perms",
        "1777",
        "--size",
        str(tmpfs_bytes),
        "--tmpfs",
        "/tmp",
        "--remount-ro",
        "/",
        "--chdir",
        "/tmp",
    ]
    if os.geteuid() != 0:
        return ["bwrap", "--unshare-all", "--cap-drop", "ALL", *common]
    # As root bwrap runs privileged and without a user namespace (inside one,
    # the host's uid 0 stays exempt from RLIMIT_NPROC): it keeps only the two
    # capabilities the runner needs to become nobody, which go with the drop.
    ns = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
    return ["bwrap", *ns, "--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", *common]
