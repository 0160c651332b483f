"""A pooled sandbox's worker: started once inside its own bubblewrap
sandbox (pool.py), it forks one fresh child per case, and only the child
ever runs untrusted code. Standard library only; run as `-c` program with
`sandbox_guard` loaded and ROLE_NAME / ROLE_SOURCE (attempt.py or
harness.py) and CONFIG (its control descriptor, the uid to drop to) given.

The worker itself runs only this file: it drops to the sandbox uid (root
in the sandbox: `nobody`), makes itself non-dumpable, imports the standard
modules attempts use, defines the role's functions (attempt.py or
harness.py, without running them) and waits on its control socket. Per
case the parent sends one message with the case's descriptors: the request
(a memfd), stdout, stderr and the case's pipes. Then:

- the worker forks; the child moves the descriptors to fixed numbers
  (0 request, 1 stdout, 2 stderr, 3.. the pipes), closes every other one
  (the control socket first), reads its request, reseeds `random`, and
  calls the role's `main(req)`, which locks the child down exactly as a
  process of its own is (sandbox_guard.lock_down: landlock, seccomp,
  rlimits, audit hook; no fork, exec, signal or ptrace from there on);
- the worker closes its copies of the descriptors at once, so a pipe's end
  of file means the child is gone, and waits for either the child's exit
  or the parent's `end`;
- at `end` (sent when the verdict is in, or at the deadline) it waits the
  grace asked for, SIGKILLs the child if it still runs, reaps it, empties
  the sandbox's /tmp (the only place a child can write), and answers with
  the child's exit code. A /tmp it cannot empty makes it say so and exit:
  the parent then replaces it.

After answering, the worker forks the next case's child ahead (the
"spare"): it keeps only its socket to the worker and the worker's stdio,
locks itself down with the last case's settings and waits for its
descriptors; a case with other settings kills it and gets a fresh fork.

So nothing of one case reaches the next: memory and module state were the
child's own copy, descriptors were closed, no process or thread can be left
(the seccomp filter and RLIMIT_NPROC refuse them, and the child is killed
and reaped before the answer), files are removed. The child cannot reach
the worker: other process, non-dumpable, no signals or ptrace (seccomp),
no descriptor of it (closed before any untrusted code runs).
"""

import fcntl
import gc
import json
import os
import select
import signal
import socket
import sys

import sandbox_guard as guard
import sandbox_seccomp as seccomp

# What attempts commonly import, loaded once here (each child gets its own copy).
PRELOAD = (
    "array",
    "bisect",
    "collections",
    "copy",
    "dataclasses",
    "datetime",
    "decimal",
    "enum",
    "fractions",
    "functools",
    "hashlib",
    "heapq",
    "itertools",
    "json",
    "math",
    "operator",
    "random",
    "re",
    "statistics",
    "string",
    "textwrap",
    "traceback",
    "typing",
    "unicodedata",
    "ctypes",
)
MAX_FDS = 8
WIPE_BUDGET = 2000  # entries of /tmp a case may leave; more and the worker is replaced instead


def _drop(ids):
    if ids and os.getuid() == 0:
        os.setgroups([])
        os.setgid(ids[1])
        os.setuid(ids[0])


def _nondumpable():
    guard.confine_roots()  # built once here, not in every child
    if seccomp.native()["libc"].prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE 0
        raise SystemExit("sandbox worker: cannot become non-dumpable")


def _child(ctrl, fds, role):
    """Runs in a child forked for a case; never returns."""
    try:
        ctrl.close()
    except BaseException:  # noqa: B036
        os._exit(70)
    _run_case(fds, role)


def _spare(ctrl, sock, role, lock):
    """Runs in a spare child, forked and locked down (with the last case's
    settings) before its case arrives; never returns. It holds nothing but
    the worker's stdio and its end of `sock`, on which the worker hands it
    the case's descriptors; a case with other settings never reaches it."""
    try:
        ctrl.close()
        keep = sock.fileno()
        os.closerange(3, keep)
        os.closerange(keep + 1, 1 << 16)
        guard.lock_down(dict(lock))
        _, fds, _, _ = socket.recv_fds(sock, 64, MAX_FDS)
        sock.close()
    except BaseException:  # noqa: B036 - no case ran; the worker sees the exit and forks afresh
        os._exit(71)
    if len(fds) < 4:
        os._exit(0)
    _run_case(fds, role)


def _run_case(fds, role):
    code = 70
    try:
        moved = [fcntl.fcntl(fd, fcntl.F_DUPFD, 16) for fd in fds]  # out of the way of 0..7 (and under 64)
        for fd in fds:
            os.close(fd)
        for i, fd in enumerate(moved):
            os.dup2(fd, i)
            os.close(fd)
        os.closerange(len(moved), 1 << 16)
        chunks = []
        while True:
            b = os.read(0, 1 << 20)
            if not b:
                break
            chunks.append(b)
        req = json.loads(b"".join(chunks))
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        if "random" in sys.modules:
            sys.modules["random"].seed()
        code = 0
        role["main"](req)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, int) and e.code is not None:
            try:
                print(e.code, file=sys.stderr)
            except BaseException:  # noqa: B036
                pass
    except BaseException:  # noqa: B036 - whatever it was, the child ends
        code = 1
        try:
            import traceback

            traceback.print_exc()
        except BaseException:  # noqa: B036
            pass
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:  # noqa: B036
                pass
        os._exit(code & 0xFF)


def _wipe(top):
    """Remove everything under `top`; False when it cannot (or there is too much)."""
    try:
        entries = os.listdir(top)
    except OSError:
        return False
    if not entries:
        return True
    seen = 0
    for dirpath, dirnames, filenames in os.walk(top, topdown=True):
        for d in dirnames:
            try:
                os.chmod(os.path.join(dirpath, d), 0o700)
            except OSError:
                pass
        seen += len(dirnames) + len(filenames)
        if seen > WIPE_BUDGET:
            return False
    for dirpath, dirnames, filenames in os.walk(top, topdown=False):
        for name in filenames:
            os.unlink(os.path.join(dirpath, name))
        for name in dirnames:
            p = os.path.join(dirpath, name)
            if os.path.islink(p):
                os.unlink(p)
            else:
                os.rmdir(p)
    return not os.listdir(top)


def _send(ctrl, obj):
    ctrl.send(json.dumps(obj).encode())


def _start_case(ctrl, fds, role, spare, lock):
    """The case's child: the spare when it was locked down with the case's
    settings and takes the descriptors, else a fresh fork. Either way the
    spare is used up."""
    pid = None
    if spare is not None:
        spare_pid, sock, spare_lock = spare
        if spare_lock == lock:
            try:
                socket.send_fds(sock, [b"case"], fds)
                pid = spare_pid
            except OSError:
                pass
        sock.close()
        if pid is None:
            _end(spare_pid)
    if pid is None:
        pid = os.fork()
        if pid == 0:
            _child(ctrl, fds, role)
    for fd in fds:
        os.close(fd)
    return pid


def _end(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def _fork_spare(ctrl, role, lock):
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        ours.close()
        _spare(ctrl, theirs, role, lock)
    theirs.close()
    return pid, ours, lock


def _serve_case(ctrl, pid, tmp, next_spare):
    """Wait for the case's child to end (or for the parent's `end`), then
    clean up, fork the next spare and report."""
    pidfd = os.pidfd_open(pid)
    status = None
    try:
        while True:
            ready = select.select([ctrl] if pidfd < 0 else [ctrl, pidfd], [], [])[0]
            if pidfd >= 0 and pidfd in ready:  # the child ended on its own: reap it now
                status = os.waitpid(pid, 0)[1]
                os.close(pidfd)
                pidfd = -1
            if ctrl not in ready:
                continue
            msg = ctrl.recv(4096)
            if not msg:
                raise SystemExit(0)  # the parent is gone
            killed = False
            if status is None:
                if not select.select([pidfd], [], [], float(json.loads(msg).get("grace", 0)))[0]:
                    os.kill(pid, signal.SIGKILL)
                    killed = True
                status = os.waitpid(pid, 0)[1]
            clean = _wipe(tmp)
            _send(ctrl, {"op": "exit", "code": os.waitstatus_to_exitcode(status), "killed": killed, "clean": clean})
            if not clean:
                raise SystemExit(3)
            try:
                spare = next_spare()  # after the answer, off the verdict's path; /tmp is empty
            except OSError:  # no fork now: the next case forks its own child
                spare = None
            if spare:
                _send(ctrl, {"op": "spare", "pid": spare[0]})  # read by the parent before the next case's answer
            return spare
    finally:
        if pidfd >= 0:
            os.close(pidfd)


def main():
    cfg = CONFIG  # noqa: F821 - given by the boot program
    ctrl = socket.socket(fileno=cfg["ctrl"])
    _drop(cfg.get("drop"))
    _nondumpable()
    for name in PRELOAD:
        try:
            __import__(name)
        except Exception:  # noqa: BLE001 - a module this interpreter lacks is imported by the attempt, or not
            pass
    role = {"__name__": ROLE_NAME}  # noqa: F821
    exec(compile(ROLE_SOURCE, ROLE_NAME + ".py", "exec"), role)  # noqa: F821
    gc.freeze()  # the children's collections leave the worker's objects alone (fewer copied pages)
    tmp = cfg.get("tmp", "/tmp")
    if not _wipe(tmp):
        raise SystemExit("sandbox worker: its /tmp is not empty")
    _send(ctrl, {"op": "ready", "pid": os.getpid()})  # its pid in its namespace: the parent can tell it from a child
    spare = None
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(ctrl, 65536, MAX_FDS)
        except InterruptedError:
            continue
        if not msg:
            return  # the parent closed the socket
        req = json.loads(msg)
        if req.get("op") != "run" or len(fds) < 4:
            for fd in fds:
                os.close(fd)
            raise SystemExit("sandbox worker: unexpected message")
        lock = req.get("lock")
        pid = _start_case(ctrl, fds, role, spare, lock)
        spare = _serve_case(
            ctrl, pid, tmp, (lambda lock=lock: _fork_spare(ctrl, role, lock)) if lock else (lambda: None)
        )


main()
