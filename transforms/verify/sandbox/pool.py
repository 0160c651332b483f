"""Pre-built bubblewrap sandboxes, reused: the parent's side of worker.py.

Starting bubblewrap and an interpreter costs tens of milliseconds, twice per
case (the attempt's sandbox and the harness's). Here each role has a pool of
workers, each a bubblewrap sandbox started once with the interpreter up,
the sandbox's libraries (`sandbox_guard`, ...) and the role's code loaded;
per case a worker forks a fresh child that locks itself down (landlock,
seccomp, rlimits, audit hook) and runs the case (worker.py says what is never shared between two cases, and
how). The attempt's worker and the harness's worker are two sandboxes, as
in the per-case path: own mount, PID, network, IPC and UTS namespaces each;
the case's pipes are handed to the two children over the control sockets
(SCM_RIGHTS), the verdict pipe to the harness's child only, the verdict key
in the harness's request only.

A worker is used for one case at a time and given back after it (having
forked its spare child for the next case, locked down ahead with this
case's settings); one that does not answer, reports a /tmp it could not
empty, or has served MAX_CASES cases is killed (its whole sandbox) and a
new one started later. A case under which a worker was lost runs again on
fresh workers; after three losses the caller (runner.py) runs every case
in sandboxes of its own.
Workers are started from one long-lived thread: bubblewrap's
`--die-with-parent` follows the thread that started it, and verification
threads come and go with each wave.
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import secrets
import signal
import socket
import subprocess
import threading
from dataclasses import dataclass

from tasksieve.transforms.verify.sandbox import programs
from tasksieve.transforms.verify.sandbox.processes import read_verdict

MAX_CASES = 1000
SPARES = True  # each worker forks and locks down the next case's child ahead of it (worker.py)
START_TIMEOUT_S = 20.0
END_TIMEOUT_S = 5.0  # a worker that does not report its child's end within this is replaced
TAIL = 2000


class WorkerFailed(RuntimeError):
    """A pooled worker did not start or stopped answering."""


@dataclass
class Exited:
    """What `verdict.decide` reads of a process: its return code (-N for signal N)."""

    returncode: int | None


def _boot(sources: dict[str, str], role: str, config: dict) -> str:
    return programs.load_libraries(sources) + (
        f"exec(compile({sources['sandbox_worker']!r}, 'sandbox_worker.py', 'exec'), "
        f"{{'__name__': '__main__', 'ROLE_NAME': {role!r}, 'ROLE_SOURCE': {sources[role]!r}, "
        f"'CONFIG': {config!r}}})\n"
    )


class Worker:
    def __init__(self, argv_prefix: tuple[str, ...], python: str, role: str, drop, sources: dict[str, str]):
        self.role, self.cases, self.healthy = role, 0, False
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.ctrl = ours
        self.err = os.memfd_create("tasksieve-worker-err")
        config = {"ctrl": theirs.fileno(), "drop": list(drop) if drop else None}
        if argv_prefix[:1] == ("bwrap",):  # the worker is its sandbox's init: a case's child sees it as 1, as
            argv_prefix = ("bwrap", "--as-pid-1", *argv_prefix[1:])  # bwrap's own init in a per-case sandbox
        argv = [*argv_prefix, python, "-I", "-S", "-B", "-c", _boot(sources, role, config)]
        try:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self.err,
                env={},
                cwd="/",
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
            )
        finally:
            theirs.close()
        self.ctrl.settimeout(START_TIMEOUT_S)
        try:
            hello = self._recv()
        except (OSError, ValueError) as e:
            self.kill()
            raise WorkerFailed(f"{role} worker did not start ({type(e).__name__}: {self.stderr_tail()})") from None
        if hello.get("op") != "ready":
            self.kill()
            raise WorkerFailed(f"{role} worker did not start: {self.stderr_tail()}")
        self.ns_pid, self.spare_ns_pid, self.spare_coming, self.locked = hello.get("pid"), None, False, False
        self.healthy = True

    def _recv(self) -> dict:
        msg = self.ctrl.recv(4096)
        if not msg:
            raise ValueError("closed")
        return json.loads(msg)

    def start(self, fds: list[int], lock: dict | None = None) -> None:
        self.cases += 1
        self.ctrl.settimeout(END_TIMEOUT_S)
        self.locked = lock is not None
        socket.send_fds(self.ctrl, [json.dumps({"op": "run", "lock": lock}).encode()], fds)

    def end_send(self, grace: float) -> None:
        self.ctrl.send(json.dumps({"grace": grace}).encode())

    def end_recv(self) -> dict:
        """The child's exit ({"code", "killed", "clean"}); WorkerFailed when the worker does not say."""
        while True:
            try:
                reply = self._recv()
            except (OSError, ValueError) as e:
                raise WorkerFailed(f"{self.role} worker: {type(e).__name__}") from None
            if reply.get("op") == "spare":  # the spare forked after the former case
                self.spare_ns_pid = reply.get("pid")
                continue
            if reply.get("op") != "exit":
                raise WorkerFailed(f"{self.role} worker: unexpected reply")
            self.spare_ns_pid = None  # used up by this case, or killed
            self.spare_coming = bool(reply.get("clean")) and self.locked
            return reply

    def spare_pid(self) -> int | None:
        """The pid inside the sandbox of the worker's spare child, waiting for it to be reported (tests)."""
        if self.spare_coming:
            try:
                reply = self._recv()
                if reply.get("op") == "spare":
                    self.spare_ns_pid = reply.get("pid")
            except (OSError, ValueError):
                pass
            self.spare_coming = False
        return self.spare_ns_pid

    def stderr_tail(self) -> str:
        try:
            size = os.fstat(self.err).st_size
            return os.pread(self.err, TAIL, max(0, size - TAIL)).decode("utf-8", "replace").strip()[-500:]
        except OSError:
            return ""

    def kill(self) -> None:
        self.healthy = False
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for close in (self.ctrl.close, lambda: os.close(self.err)):
            try:
                close()
            except OSError:
                pass


class _Spawner:
    """One long-lived thread that starts every worker (see the module doc)."""

    def __init__(self):
        self.jobs: queue.Queue = queue.Queue()
        threading.Thread(target=self._loop, name="tasksieve-sandbox-spawner", daemon=True).start()

    def _loop(self):
        while True:
            fn, box, done = self.jobs.get()
            try:
                box.append(fn())
            except BaseException as e:  # noqa: B036 - handed to the caller
                box.append(e)
            done.set()

    def call(self, fn):
        box, done = [], threading.Event()
        self.jobs.put((fn, box, done))
        done.wait()
        if isinstance(box[0], BaseException):
            raise box[0]
        return box[0]


class Pool:
    def __init__(self, prefix: tuple[str, ...], python: str, drop, sources: dict[str, str]):
        self.prefix, self.python, self.drop, self.sources = prefix, python, drop, sources
        self.idle: dict[str, list[Worker]] = {"sandbox_attempt": [], "sandbox_harness": []}
        self.all: set[Worker] = set()
        self.lock = threading.Lock()

    def acquire(self, role: str) -> Worker:
        while True:
            with self.lock:
                if not self.idle[role]:
                    break
                w = self.idle[role].pop()
            if w.proc.poll() is None:
                return w
            self.discard(w)  # died while idle (killed from outside): never handed a case
        w = _spawner().call(lambda: Worker(self.prefix, self.python, role, self.drop, self.sources))
        with self.lock:
            self.all.add(w)
        return w

    def release(self, w: Worker) -> None:
        if w.healthy and w.cases < MAX_CASES:
            with self.lock:
                self.idle[w.role].append(w)
            return
        self.discard(w)

    def discard(self, w: Worker) -> None:
        w.kill()
        with self.lock:
            self.all.discard(w)

    def close(self) -> None:
        with self.lock:
            workers, self.all = list(self.all), set()
            self.idle = {k: [] for k in self.idle}
        for w in workers:
            w.kill()

    def worker_pids(self) -> list[int]:
        """The host pids of the live workers' bubblewrap processes."""
        with self.lock:
            return [w.proc.pid for w in self.all]

    def worker_ns_pids(self) -> dict[int, tuple]:
        """{bubblewrap's host pid: the pids inside its sandbox of the worker and of its spare child}."""
        with self.lock:
            idle = {w for ws in self.idle.values() for w in ws}
            return {w.proc.pid: (w.ns_pid, w.spare_pid() if w in idle else w.spare_ns_pid) for w in self.all}


_POOLS: dict[tuple, Pool] = {}
_POOLS_LOCK = threading.Lock()
_SPAWNER: list[_Spawner] = []  # one per process, for every pool


def _spawner() -> _Spawner:
    with _POOLS_LOCK:
        if not _SPAWNER:
            _SPAWNER.append(_Spawner())
        return _SPAWNER[0]


def pool_for(prefix: tuple[str, ...], python: str, drop, sources: dict[str, str]) -> Pool:
    key = (prefix, python, tuple(drop) if drop else None, tuple(sorted(sources.items())))
    with _POOLS_LOCK:
        if key not in _POOLS:
            _POOLS[key] = Pool(prefix, python, drop, sources)
        return _POOLS[key]


def close_all() -> None:
    """Kill every pooled sandbox (at exit, and for tests)."""
    with _POOLS_LOCK:
        pools = list(_POOLS.values())
        _POOLS.clear()
    for p in pools:
        p.close()


def worker_pids() -> list[int]:
    with _POOLS_LOCK:
        pools = list(_POOLS.values())
    return [pid for p in pools for pid in p.worker_pids()]


def worker_processes() -> set[int]:
    """Host pids of the pooled workers themselves: each one's bubblewrap
    processes and the worker interpreter under them (known by its pid inside
    the sandbox), never a child it forked for a case (tests: no child of a
    case outlives its verdict)."""
    with _POOLS_LOCK:
        pools = list(_POOLS.values())
    inner = {pid: ns for p in pools for pid, ns in p.worker_ns_pids().items()}
    parent, info = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                parent[int(entry)] = int(fh.read().rsplit(b")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                argv0 = os.path.basename(fh.read().split(b"\0", 1)[0])
            with open(f"/proc/{entry}/status", "rb") as fh:
                nspid = next(ln for ln in fh.read().splitlines() if ln.startswith(b"NSpid:")).split()[-1]
            info[int(entry)] = (argv0, int(nspid))
        except (OSError, IndexError, ValueError, StopIteration):
            continue
    found = set(inner)
    for pid, up in parent.items():
        q, hops = up, 0
        while q in parent and q not in inner and hops < 64:
            q, hops = parent[q], hops + 1
        if q not in inner or pid not in info:
            continue
        argv0, nspid = info[pid]
        if argv0 == b"bwrap" or nspid in inner[q]:
            found.add(pid)
    return found


def _forget_in_child() -> None:
    # A forked copy of this process must not talk to our workers: it starts its own.
    global _POOLS_LOCK
    _POOLS.clear()
    _SPAWNER.clear()  # its thread did not survive the fork
    _POOLS_LOCK = threading.Lock()


atexit.register(close_all)
os.register_at_fork(after_in_child=_forget_in_child)


def _memfd(name: str, data: bytes = b"") -> int:
    fd = os.memfd_create(name)
    if data:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _tail(fd: int) -> tuple[int, str]:
    size = os.fstat(fd).st_size
    return size, os.pread(fd, TAIL, max(0, size - TAIL)).decode("utf-8", "replace")


class _Gone(Exception):
    """A worker was gone before it took the case: the case is run again on others."""


def run_case(pool: Pool, case: dict, make_request, wall_s: float, lock: dict | None = None) -> dict:
    """`lock`: the lock-down settings (runner._lock_settings) a worker's spare
    child is locked down with ahead of its case; None: no spare."""
    lock = lock if SPARES else None
    for _ in range(3):
        try:
            return _run_case(pool, case, make_request, wall_s, lock)
        except _Gone:
            continue
    # Three pairs of workers lost under one case: the pool does not work here (the caller runs the case
    # in sandboxes of its own from now on).
    raise WorkerFailed("workers died under a case three times")


def _requests(case: dict, make_request, key: str) -> tuple[bytes, bytes]:
    """The attempt's and the harness's requests; the key goes to the harness only."""
    entry = (case.get("entry_point") or "").strip()
    a_req = make_request("/tmp", fd_in=3, fd_out=4, entry_point=entry, code=case["solution"])
    h_req = make_request(
        "/tmp",
        fd_to=3,
        fd_from=4,
        fd_result=5,
        verdict_key=key,
        entry_point=entry,
        tests=case["tests"],
        call_check=bool(case.get("call_check")),
        support=case.get("support") or "",
    )
    return a_req, h_req


def _start(jobs: list[tuple[Worker, list[int]]], lock: dict | None) -> list[Worker]:
    """Hand each worker its descriptors, in order; the workers that took them
    (a worker that cannot be written to is marked unhealthy, and the rest not tried)."""
    started = []
    for w, fds in jobs:
        try:
            w.start(fds, lock)
        except OSError:
            w.healthy = False
            break
        started.append(w)
    return started


def _end(started: list[Worker], line: bytes | None, timed_out: bool) -> tuple[list, bool]:
    """Tell the started workers to end their children (the attempt's given a
    moment to exit on its own when the harness says it exited early; both when
    no verdict came); ([the children's exit codes], whether a worker was lost)."""
    grace = 0.5 if line is None and not timed_out else 0.0
    grace_a = 0.5 if line and b"exited_early" in line else 0.0
    codes, lost = [None, None], False
    for w, g in zip(started, (grace_a, grace)):
        try:
            w.end_send(g)
        except OSError:
            w.healthy, lost = False, True
    for i, w in enumerate(started):
        if not w.healthy:
            continue
        try:
            reply = w.end_recv()
            codes[i] = None if reply.get("killed") else reply.get("code")  # a kill of ours says nothing
            w.healthy = bool(reply.get("clean"))
        except WorkerFailed:
            w.healthy, lost = False, True
    return codes, lost


def _run_case(pool: Pool, case: dict, make_request, wall_s: float, lock: dict | None) -> dict:
    """One case in a pooled attempt sandbox and a pooled harness sandbox.
    `make_request(workdir, **fields)` builds a role's request (runner._request).
    Returns the raw outcome for verdict.decide: line, timed_out, the two
    exit codes, the tails and sizes of the outputs, the key."""
    key = secrets.token_hex(16)  # only the harness's child learns it
    a_req, h_req = _requests(case, make_request, key)
    attempt = pool.acquire("sandbox_attempt")
    try:
        harness = pool.acquire("sandbox_harness")
    except BaseException:
        pool.release(attempt)
        raise
    c2a, a2c, res = os.pipe(), os.pipe(), os.pipe()
    a_out, a_err, h_err = _memfd("attempt.out"), _memfd("attempt.err"), _memfd("harness.err")
    a_in, h_in = _memfd("attempt.req", a_req), _memfd("harness.req", h_req)
    theirs = [c2a[0], a2c[1], c2a[1], a2c[0], res[1], a_in, h_in]
    started: list[Worker] = []
    line, timed_out, codes, lost = None, False, [None, None], False
    try:
        try:
            jobs = [
                (attempt, [a_in, a_out, a_err, c2a[0], a2c[1]]),
                (harness, [h_in, h_err, h_err, c2a[1], a2c[0], res[1]]),
            ]
            started = _start(jobs, lock)
        finally:
            for fd in theirs:
                os.close(fd)
        if len(started) == 2:
            line, timed_out = read_verdict(res[0], wall_s)
        codes, lost = _end(started, line, timed_out)
    finally:
        os.close(res[0])
        for w in (attempt, harness):
            pool.release(w)
        sizes_tails = {
            n: _tail(fd) for n, fd in (("attempt.out", a_out), ("attempt.err", a_err), ("harness.err", h_err))
        }
        for fd in (a_out, a_err, h_err):
            os.close(fd)
    # A worker that died under the case (killed from outside, or broken: a case's child cannot signal it)
    # takes its sandbox's processes with it, so whatever the harness said may say so: the case runs again
    # on fresh workers.
    if len(started) < 2 or lost:
        raise _Gone()
    return {
        "line": line,
        "timed_out": timed_out,
        "procs": [Exited(codes[0]), Exited(codes[1])],
        "sizes": {n: st[0] for n, st in sizes_tails.items()},
        "tails": {n: st[1] for n, st in sizes_tails.items()},
        "key": key,
    }
