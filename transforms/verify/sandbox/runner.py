"""The sandbox that runs model-written programs: a security boundary, and the
place where a code attempt's verdict is decided.

Each case (an attempt's program and the task's tests) runs as TWO sandboxed
processes that share nothing but two pipes:

- the attempt's process (`attempt.py`) runs the program and answers
  calls of its entry point, in plain data;
- the harness (`harness.py`) runs the tests against a proxy of the
  entry point, decides pass or fail, and writes the verdict on a third pipe
  that only it holds. It never runs attempt code; the attempt never sees
  the tests.

Both are started by this module, stdlib-only, as `python -I -S -B` with an
empty environment, locked down by `guard.py` (drop to a non-root uid,
Landlock, seccomp filter, rlimits, audit hook). The harness signs its
verdict with a key only it is given, so a line anyone else writes on that
pipe fails the case. Around them, one of three modes:

- `bwrap` (bubblewrap): a new mount namespace holding only /usr, the
  library folders and the interpreter's prefix, read-only, a private
  size-capped tmpfs /tmp as the work dir, fresh /proc and /dev; own PID,
  network, IPC and UTS namespaces (and a user namespace when not root);
  every capability dropped but the two the runner needs to drop to
  `nobody`; die-with-parent, empty environment, in a session and process
  group of its own without a terminal (one killpg ends all of it).
  Landlock on top where the kernel has it.
- `rlimit` (fallback): a subprocess, as root dropped to `nobody` with an
  interpreter `nobody` can read, through `unshare` (own PID namespace and
  /proc, mount, network, IPC; not root: in a user namespace) where it
  works. Landlock is required: it alone keeps host files, other
  processes' /proc entries and the parent's descriptors and environment
  out. Used only after an isolation probe (isolation.py) with the audit
  hook off finds nothing of the host. Refuses to run as root.
- `unsafe-root`: the fallback even where it cannot drop root. Named, never
  chosen by `auto`.

`auto` takes bwrap, else rlimit, else raises NoSafeSandbox: code tasks are
then dropped before sampling (`no_safe_sandbox`). Beam-free; thread-safe.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

from tasksieve.transforms.verify.sandbox import isolation, mounts, programs, verdict
from tasksieve.transforms.verify.sandbox import pool as sandbox_pool
from tasksieve.transforms.verify.sandbox.mounts import NOBODY, PYTHON
from tasksieve.transforms.verify.sandbox.processes import kill_group, read_verdict, tail
from tasksieve.transforms.verify.sandbox.verdict import CaseResult, Limits

log = logging.getLogger(__name__)

# The programs run inside the sandbox (programs.py), read from the files beside this one.
_SOURCES = programs.read_sources()
MODES = ("auto", "bwrap", "rlimit", "unsafe-root")
# Largest message either side may send (one call's arguments or answer).
MESSAGE_CAP = 8 * 2**20
STARTUP_MARGIN_S = 10.0
# The rlimit fallback has namespaces only where unshare is allowed, and never a
# mount namespace holding just the interpreter: Landlock (guard.confine) is what
# keeps the host out, so the guard refuses to run without it there.
FALLBACK_CONFINE = "require"
# The whole environment every sandboxed process (bwrap, unshare, the
# interpreter) starts with: the allow-list is empty, so no variable of the run
# (API keys, tokens, paths) reaches one. `-I` makes Python ignore PYTHON* anyway.
SANDBOX_ENV: dict[str, str] = {}


def _boot(role: str) -> str:
    """The -c program: load the libraries (`sandbox_guard`, ...), then run the role."""
    return (
        programs.load_libraries(_SOURCES)
        + f"exec(compile({_SOURCES[role]!r}, '{role}.py', 'exec'), {{'__name__': '__main__'}})\n"
    )


_BOOT = {role: _boot(role) for role in ("sandbox_attempt", "sandbox_harness")}


@dataclass
class SandboxRun:
    results: list[CaseResult]
    seconds: float
    mode: str
    stdout: str  # the last case's attempt process
    stderr: str


class NoSafeSandbox(RuntimeError):
    """No sandbox that keeps attempt code off the host (and off root) is usable here."""


# --- where and as whom ------------------------------------------------------------------------


def _python_candidates() -> list[str]:
    """Interpreters for the fallback, ours first. The sandboxed programs are
    stdlib-only, so any Python 3.9+ serves."""
    found = [PYTHON]
    for name in ("python3", f"python{sys.version_info[0]}.{sys.version_info[1]}"):
        for d in ("/usr/bin", "/usr/local/bin", "/bin"):
            p = os.path.join(d, name)
            if os.path.exists(p) and os.path.realpath(p) not in found:
                found.append(os.path.realpath(p))
    return found


@dataclass(frozen=True)
class _Setup:
    mode: str
    prefix: tuple[str, ...]  # command before the interpreter
    python: str
    drop: tuple[int, int] | None
    private_tmp: bool  # bwrap: the work dir is the sandbox's own /tmp
    confine: str = "require"  # landlock (guard.confine): require (refuse without it), try, off


_CACHE: dict[str, _Setup | str] = {}
_LOCK = threading.RLock()
_WARNED: set[str] = set()


def _warn_once(key: str, message: str) -> None:
    if key in _WARNED:
        return
    _WARNED.add(key)
    log.warning(message)
    print(f"\n*** WARNING: {message}\n", file=sys.stderr, flush=True)


_PROBE = {
    "solution": "import collections, fractions, decimal, statistics\ndef f():\n    return 1\n",
    "tests": "assert f() == 1",
    "entry_point": "f",
    "call_check": False,
}


def _probe(setup: _Setup) -> str | None:
    """None when a trivial case passes under `setup`, else why not."""
    try:
        res = _run_case(_PROBE, Limits(), setup, True)[0]
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    return None if res.passed else (res.error or "failed")


def _unshare_prefix() -> list[str]:
    """Namespaces for the fallback, the most that works here: its own PID
    namespace with a fresh /proc (only the sandbox's processes exist there),
    mount, network and IPC namespaces; not root: inside a user namespace of
    its own. The sandboxed interpreter is then its namespace's init, which
    forks once (guard.leave_init) so that the CPU limit's signal still ends
    it. Landlock holds the host's files and processes out either way."""
    if not shutil.which("unshare"):
        return []
    pid_ns = ["--pid", "--fork", "--kill-child", "--mount", "--mount-proc"]
    user_ns = [] if os.geteuid() == 0 else ["--user", "--map-current-user"]
    tries = [["unshare", *user_ns, *pid_ns, "--net", "--ipc", "--"]]
    if os.geteuid() == 0:
        tries.append(["unshare", "--net", "--ipc", "--"])
    for prefix in tries:
        try:
            ok = (
                subprocess.run([*prefix, "true"], capture_output=True, timeout=10, env=dict(SANDBOX_ENV)).returncode
                == 0
            )
        except (OSError, subprocess.SubprocessError):
            ok = False
        if ok:
            return prefix
    return []


def _find_setup(mode: str) -> _Setup | str:
    """The setup for a concrete mode, or why it is not usable here."""
    if mode == "bwrap":
        if not shutil.which("bwrap"):
            return "bubblewrap (bwrap) is not installed"
        setup = _Setup("bwrap", tuple(mounts.bwrap_prefix(16 * 2**20)), PYTHON, mounts.nobody_ids(), True, "try")
        why = _probe(setup)
        return setup if why is None else f"bubblewrap failed its start-up probe ({why})"
    prefix = tuple(_unshare_prefix())
    ids = mounts.nobody_ids()
    if mode == "unsafe-root" and ids is not None:
        _warn_once(
            "unsafe",
            "sandbox mode 'unsafe-root': model-written code runs AS ROOT with rlimits and a "
            "seccomp filter only; it can read every file on this machine",
        )
        return _Setup("unsafe-root", prefix, PYTHON, None, False, "try")
    if ids is None:  # not root: the attempt runs as our uid; landlock keeps it off our files and processes
        setup = _Setup(mode, prefix, PYTHON, None, False, FALLBACK_CONFINE)
        why = _probe(setup) or isolation.leaks(setup, _run_case, Limits())
        return setup if why is None else f"the fallback does not hold here ({why})"
    tried = []
    for python in _python_candidates():
        if not mounts.world_reachable(python):
            tried.append(f"{python} (not readable by {NOBODY})")
            continue
        setup = _Setup(mode, prefix, python, ids, False, FALLBACK_CONFINE)
        why = _probe(setup) or isolation.leaks(setup, _run_case, Limits())
        if why is None:
            return setup
        tried.append(f"{python} ({why})")
    return f"cannot run as {NOBODY}: no interpreter it can use ({'; '.join(tried)})"


def _setup_for(requested: str) -> _Setup:
    if requested not in MODES:
        raise ValueError(f"unknown sandbox mode {requested!r}; expected one of {', '.join(MODES)}")
    with _LOCK:
        order = ["bwrap", "rlimit"] if requested == "auto" else [requested]
        reasons = []
        for mode in order:
            if mode not in _CACHE:
                _CACHE[mode] = _find_setup(mode)
            found = _CACHE[mode]
            if isinstance(found, _Setup):
                if requested == "auto" and mode != "bwrap":
                    _warn_once(
                        "fallback",
                        f"{reasons[0]}; model-written code runs in the rlimit fallback "
                        "(Landlock keeps host files and processes out; it passed its isolation probe: "
                        "see README, 'The code sandbox'). Install bubblewrap (apt-get install "
                        "bubblewrap) for the full sandbox.",
                    )
                return found
            reasons.append(f"{mode}: {found}")
        raise NoSafeSandbox("; ".join(reasons))


def resolve_mode(requested: str = "auto") -> str:
    """The mode `requested` runs in here (bwrap, rlimit or unsafe-root), or
    NoSafeSandbox with the reasons."""
    return _setup_for(requested).mode


def describe(requested: str = "auto") -> str:
    """One line for run summaries: which sandbox code attempts get."""
    try:
        setup = _setup_for(requested)
    except NoSafeSandbox as e:
        return f"none usable ({e}): code tasks are dropped with no_safe_sandbox"
    who = "nobody" if setup.drop else ("ROOT" if os.geteuid() == 0 else "the current user")
    if setup.mode != "rlimit":
        return f"{setup.mode} (attempts run as {who})"
    pids = "own PID namespace" if "--pid" in setup.prefix else "no PID namespace"
    return f"{setup.mode} (attempts run as {who}; Landlock, {pids})"


# --- running ----------------------------------------------------------------------------------


def run_cases(cases: list[dict], limits: Limits = Limits(), mode: str = "auto", audit_hook: bool = True) -> SandboxRun:
    """Run each case (dict: solution, tests, entry_point, call_check, and
    optionally support = the reference solution, for helpers the tests use)
    as an attempt process and a harness process. Every case gets a
    CaseResult; never raises for anything a case does (NoSafeSandbox when no
    sandbox is usable). `audit_hook=False` only for tests of the kernel
    layers alone."""
    t0 = time.perf_counter()
    setup = _setup_for(mode)
    results, out, err = [], "", ""
    for case in cases:
        res, out, err = (
            _run_pooled(case, limits, setup, audit_hook)
            if _pooled(setup)
            else _run_case(case, limits, setup, audit_hook)
        )
        results.append(res)
    return SandboxRun(results, time.perf_counter() - t0, setup.mode, out, err)


def _lock_settings(setup: _Setup, workdir: str, limits: Limits, audit_hook: bool) -> dict:
    """What guard.lock_down reads from a request (guard.LOCK_KEYS)."""
    return {
        "workdir": workdir,
        "drop": setup.drop,
        "allow_root": setup.mode == "unsafe-root",
        "audit_hook": audit_hook,
        "confine": setup.confine,
        "limits": {
            "cpu": max(1, int(limits.cpu_seconds)),
            "memory": limits.memory_mb * 2**20,
            "output": limits.output_bytes,
            "case_wall": float(limits.wall_seconds),
        },
    }


def _request(setup: _Setup, workdir: str, limits: Limits, audit_hook: bool, **kw) -> bytes:
    return json.dumps(
        {
            **_lock_settings(setup, workdir, limits, audit_hook),
            "message_cap": MESSAGE_CAP,
            **kw,
        }
    ).encode("utf-8", "surrogatepass")


# --- pooled: pre-built bubblewrap sandboxes that fork a fresh child per case (pool.py, worker.py)

POOLED = True  # bwrap cases run in pooled sandboxes; False: a fresh pair of sandboxes per case
_POOL_BROKEN: list[str] = []  # why pooling failed here, once: the per-case path is used from then on


def _pooled(setup: _Setup) -> bool:
    return POOLED and setup.mode == "bwrap" and not _POOL_BROKEN


def _run_pooled(case: dict, limits: Limits, setup: _Setup, audit_hook: bool) -> tuple[CaseResult, str, str]:
    pool = sandbox_pool.pool_for(setup.prefix, setup.python, setup.drop, _SOURCES)

    def make_request(workdir, **kw):
        return _request(setup, workdir, limits, audit_hook, **kw)

    try:
        raw = sandbox_pool.run_case(
            pool,
            case,
            make_request,
            limits.wall_seconds + POOLED_MARGIN_S,
            json.loads(json.dumps(_lock_settings(setup, "/tmp", limits, audit_hook))),
        )
    except sandbox_pool.WorkerFailed as e:
        with _LOCK:
            if not _POOL_BROKEN:
                _POOL_BROKEN.append(str(e))
                _warn_once("pool", f"pooled sandboxes do not work here ({e}); each case starts its own")
        return _run_case(case, limits, setup, audit_hook)
    result = verdict.decide(
        raw["line"], raw["timed_out"], raw["procs"], limits, setup, raw["tails"]["harness.err"], raw["key"]
    )
    if raw["sizes"]["attempt.out"] >= limits.output_bytes or raw["sizes"]["attempt.err"] >= limits.output_bytes:
        result = CaseResult(False, "output_too_large")
    return result, raw["tails"]["attempt.out"], raw["tails"]["attempt.err"]


POOLED_MARGIN_S = 2.0  # nothing to start per case: the parent's deadline is the harness's own plus this


def _workdir(setup: _Setup, host_tmp: str, name: str) -> str:
    if setup.private_tmp:
        return "/tmp"
    workdir = os.path.join(host_tmp, name)
    os.mkdir(workdir, 0o700)
    if setup.drop:
        os.chown(workdir, *setup.drop)
    return workdir


def _spawn(setup: _Setup, role: str, workdir: str, host_tmp: str, name: str, fds: tuple[int, ...]):
    argv = [*setup.prefix, setup.python, "-I", "-S", "-B", "-c", _BOOT[role]]
    out = open(os.path.join(host_tmp, f"{name}.out"), "wb")
    err = open(os.path.join(host_tmp, f"{name}.err"), "wb")
    try:
        return subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=err,
            env=dict(SANDBOX_ENV),
            cwd="/" if setup.private_tmp else workdir,
            pass_fds=fds,
            start_new_session=True,
        )
    finally:
        out.close()
        err.close()


def _feed(proc: subprocess.Popen, request: bytes) -> None:
    try:
        proc.stdin.write(request)
        proc.stdin.close()
    except (BrokenPipeError, OSError):
        pass


def _run_case(case: dict, limits: Limits, setup: _Setup, audit_hook: bool) -> tuple[CaseResult, str, str]:
    host_tmp = tempfile.mkdtemp(prefix="tasksieve-sbx-")
    if setup.drop:
        os.chmod(host_tmp, 0o711)  # nobody may pass through to its own directory
    key = secrets.token_hex(16)  # only the harness learns it: a verdict without it is forged
    c2a, a2c, res = os.pipe(), os.pipe(), os.pipe()
    child_ends = [c2a[0], a2c[1], c2a[1], a2c[0], res[1]]
    procs = []
    try:
        entry = (case.get("entry_point") or "").strip()
        a_dir, h_dir = _workdir(setup, host_tmp, "a"), _workdir(setup, host_tmp, "h")
        a_req = _request(
            setup, a_dir, limits, audit_hook, fd_in=c2a[0], fd_out=a2c[1], entry_point=entry, code=case["solution"]
        )
        h_req = _request(
            setup,
            h_dir,
            limits,
            audit_hook,
            fd_to=c2a[1],
            fd_from=a2c[0],
            fd_result=res[1],
            verdict_key=key,
            entry_point=entry,
            tests=case["tests"],
            call_check=bool(case.get("call_check")),
            support=case.get("support") or "",
        )
        attempt = _spawn(setup, "sandbox_attempt", a_dir, host_tmp, "attempt", (c2a[0], a2c[1]))
        procs.append(attempt)
        harness = _spawn(setup, "sandbox_harness", h_dir, host_tmp, "harness", (c2a[1], a2c[0], res[1]))
        procs.append(harness)
        for fd in child_ends:
            os.close(fd)
        child_ends = []
        _feed(attempt, a_req)
        _feed(harness, h_req)
        line, timed_out = read_verdict(res[0], limits.wall_seconds + STARTUP_MARGIN_S)
        try:  # an attempt that died on its own (CPU limit, ...) has its exit status read before the kill
            attempt.wait(timeout=0.5 if line and b"exited_early" in line else 0)
        except subprocess.TimeoutExpired:
            pass
    finally:
        for fd in child_ends:
            os.close(fd)
        os.close(res[0])
        for p in procs:
            kill_group(p)
        files = {n: os.path.join(host_tmp, n) for n in ("attempt.out", "attempt.err", "harness.err")}
        sizes = {n: os.path.getsize(p) if os.path.exists(p) else 0 for n, p in files.items()}
        tails = {n: tail(p) if os.path.exists(p) else "" for n, p in files.items()}
        shutil.rmtree(host_tmp, ignore_errors=True)
    result = verdict.decide(line, timed_out, procs, limits, setup, tails["harness.err"], key)
    if sizes["attempt.out"] >= limits.output_bytes or sizes["attempt.err"] >= limits.output_bytes:
        result = CaseResult(False, "output_too_large")
    return result, tails["attempt.out"], tails["attempt.err"]
