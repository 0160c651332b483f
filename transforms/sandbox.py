"""The sandbox that runs model-written programs: a security boundary.

Each run is a separate Python process (`sandbox_runner.py`) that gets one
or more cases (an attempt and the task's tests) on stdin and answers one
line per case on a private pipe. Two modes:

- `bwrap` (bubblewrap, when installed and its start-up probe passes):
  `--unshare-all` (no network: an empty network namespace; own PID, IPC,
  UTS and user namespaces), `--ro-bind / /` (read-only filesystem), a
  private size-capped tmpfs on /tmp as the working directory, fresh /proc
  and /dev, `--die-with-parent`, `--new-session`, an empty environment.
  bwrap itself is started as `nobody` when we are root, so the rlimits
  below bind (the kernel exempts root from RLIMIT_NPROC).
- `rlimit` (fallback, with a loud warning once per process): a subprocess
  as `nobody` when we are root, in a private temp directory, with an empty
  environment, inside `unshare --user --net` when the kernel allows it (no
  network) and the audit hook otherwise.

Both modes: RLIMIT_CPU, RLIMIT_AS, RLIMIT_FSIZE (output and file size cap),
RLIMIT_NOFILE, RLIMIT_NPROC = 0 (no fork, no threads), a wall-clock
deadline after which the whole process group is killed, and the runner's
audit hook (sockets, process creation, ctypes, writes outside the working
directory, other processes' /proc entries). The audit hook is a second
line of defence only: native code can get around it, which is why the
kernel-enforced limits come first. What the fallback does not guarantee is
in the README.

Beam-free; thread-safe (verifications run from a thread pool).
"""

from __future__ import annotations

import json
import logging
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

RUNNER_SOURCE = (Path(__file__).with_name("sandbox_runner.py")).read_text()
# The interpreter the sandbox runs: the real binary behind the venv, with
# -I (no environment, no user site) -S (no site-packages) -B (no .pyc writes).
PYTHON = os.path.realpath(sys.executable)
NOBODY = "nobody"


@dataclass(frozen=True)
class Limits:
    cpu_seconds: int = 5
    wall_seconds: float = 10.0
    memory_mb: int = 512
    output_bytes: int = 64 * 1024


@dataclass
class CaseResult:
    passed: bool
    error: str | None


@dataclass
class SandboxRun:
    results: list[CaseResult]
    seconds: float
    mode: str
    stdout: str
    stderr: str


# --- mode selection ----------------------------------------------------------------------

_MODE: dict[str, str] = {}
_MODE_LOCK = threading.RLock()  # the fallback probe re-enters
_WARNED = set()


def _nobody_ids() -> tuple[int, int] | None:
    """(uid, gid) to drop to when we are root; None when we are not."""
    if os.geteuid() != 0:
        return None
    try:
        pw = pwd.getpwnam(NOBODY)
        return pw.pw_uid, pw.pw_gid
    except KeyError:
        return 65534, 65534


PY_MOUNT = "/tmp/.python"


def _bwrap_argv(tmpfs_bytes: int) -> tuple[list[str], str]:
    """(bwrap argv, the interpreter's path inside). As root, bwrap runs in
    its privileged mode without a user namespace (in one, uid 0 stays the
    host's root, whom the kernel exempts from RLIMIT_NPROC), and the runner
    drops to nobody first thing; the interpreter is bound into the private
    /tmp because nobody may not reach it where it lives (e.g. under /root)."""
    common = ["--die-with-parent", "--new-session", "--clearenv", "--ro-bind", "/", "/", "--proc", "/proc",
              "--dev", "/dev", "--perms", "1777", "--size", str(tmpfs_bytes), "--tmpfs", "/tmp"]
    if os.geteuid() != 0:
        return ["bwrap", "--unshare-all", *common, "--chdir", "/tmp"], PYTHON
    prefix = os.path.realpath(sys.base_prefix)
    rel = os.path.relpath(PYTHON, prefix)
    if rel.startswith(".."):  # an interpreter outside its prefix: bind its folder instead
        prefix, rel = os.path.dirname(PYTHON), os.path.basename(PYTHON)
    ns = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
    return ["bwrap", *ns, *common, "--ro-bind", prefix, PY_MOUNT, "--chdir", "/tmp"], os.path.join(PY_MOUNT, rel)


def _unshare_prefix() -> list[str]:
    """`unshare --net` (root) or `unshare --user --net` if this kernel
    allows it: no network even without bubblewrap."""
    if not shutil.which("unshare"):
        return []
    prefix = ["unshare", "--net", "--"] if os.geteuid() == 0 else ["unshare", "--user", "--net", "--"]
    try:
        ok = subprocess.run([*prefix, PYTHON, "-I", "-S", "-c", "pass"], env={}, capture_output=True,
                            timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        ok = False
    return prefix if ok else []


def _warn_once(key: str, message: str) -> None:
    if key in _WARNED:
        return
    _WARNED.add(key)
    log.warning(message)
    print(f"\n*** WARNING: {message}\n", file=sys.stderr, flush=True)


def resolve_mode(requested: str = "auto") -> str:
    """`bwrap` or `rlimit`. `auto` takes bwrap when it is installed and a
    probe run inside it works; otherwise the fallback, with a warning."""
    if requested not in ("auto", "bwrap", "rlimit"):
        raise ValueError(f"unknown sandbox mode {requested!r}")
    if requested == "rlimit":
        return "rlimit"
    with _MODE_LOCK:
        if "auto" not in _MODE:
            why = None
            if not shutil.which("bwrap"):
                why = "bubblewrap (bwrap) is not installed"
            else:
                try:
                    probe = _run([_PROBE], Limits(), "bwrap")
                    if not probe.results[0].passed:
                        why = f"bubblewrap failed its start-up probe ({probe.results[0].error}; {probe.stderr[-300:]!r})"
                except Exception as e:
                    why = f"bubblewrap failed its start-up probe ({type(e).__name__}: {e})"
            _MODE["auto"] = "bwrap" if why is None else "rlimit"
            if why:
                _warn_once("fallback", f"{why}; model-written code runs in the weaker rlimit sandbox (no filesystem "
                           "isolation, network blocked only by a network namespace if the kernel allows one, else by an audit "
                           "hook). Install bubblewrap (apt-get install bubblewrap) for the full sandbox.")
        if requested == "bwrap" and _MODE["auto"] != "bwrap":
            raise RuntimeError("sandbox mode 'bwrap' was asked for but bubblewrap is not usable here")
        return _MODE["auto"]


_PROBE = {"solution": "import collections, fractions, decimal, statistics\ndef f():\n    return 1\n",
          "tests": "assert f() == 1", "entry_point": "f", "call_check": False}


def _fallback_setup() -> tuple[list[str], bool]:
    """(command prefix, drop to nobody?) for the rlimit mode, probed once."""
    with _MODE_LOCK:
        if "fallback" not in _MODE:
            prefix = _unshare_prefix()
            drop = False
            if _nobody_ids() is not None:
                # As root: can nobody still import the standard library?
                _MODE["fallback"] = (prefix, True)
                probe = _run([_PROBE], Limits(), "rlimit")
                drop = bool(probe.results[0].passed)
                if not drop:
                    _warn_once("root", "the rlimit sandbox cannot drop to 'nobody' (its Python is not readable by "
                               "nobody); attempts run as root: fork and file-permission limits are not enforced")
            if not prefix:
                _warn_once("net", "no network namespace available: the rlimit sandbox blocks network only through "
                           "its audit hook")
            _MODE["fallback"] = (prefix, drop)
        return _MODE["fallback"]


# --- running -----------------------------------------------------------------------------

def run_cases(cases: list[dict], limits: Limits = Limits(), mode: str = "auto", audit_hook: bool = True) -> SandboxRun:
    """Run each case (dict: solution, tests, entry_point, call_check) in one
    sandboxed process. Every case gets a CaseResult; never raises for
    anything a case does. `mode`: auto, bwrap or rlimit (tests force one);
    `audit_hook=False` only for tests of the kernel-enforced limits alone."""
    return _run(cases, limits, resolve_mode(mode), audit_hook)


def _run(cases: list[dict], limits: Limits, mode: str, audit_hook: bool = True) -> SandboxRun:
    t0 = time.perf_counter()
    n = max(1, len(cases))
    nonce = secrets.token_hex(16)
    host_tmp = tempfile.mkdtemp(prefix="tasksieve-sbx-")
    ids = _nobody_ids()
    try:
        if mode == "bwrap":
            workdir = "/tmp"
            bwrap, python = _bwrap_argv(max(limits.output_bytes * 16, 1 << 20))
            argv = [*bwrap, python, "-I", "-S", "-B", "-c", RUNNER_SOURCE]
            drop = ids
        else:
            workdir = os.path.join(host_tmp, "work")
            os.mkdir(workdir, 0o700)
            prefix, may_drop = _fallback_setup()
            drop = ids if may_drop else None
            if drop is not None:
                os.chmod(host_tmp, 0o711)  # nobody may pass through to its own directory
                os.chown(workdir, *drop)
            argv = [*prefix, PYTHON, "-I", "-S", "-B", "-c", RUNNER_SOURCE]
        out_path, err_path = os.path.join(host_tmp, "stdout"), os.path.join(host_tmp, "stderr")
        r, w = os.pipe()
        try:
            # The child keeps the pipe's write end under the same number (pass_fds).
            request = json.dumps({
                "nonce": nonce, "fd": w, "workdir": workdir, "cases": cases, "drop": drop, "audit_hook": audit_hook,
                "limits": {"cpu": int(limits.cpu_seconds * n) + 1, "memory": limits.memory_mb * 2**20,
                           "output": limits.output_bytes, "case_wall": float(limits.wall_seconds)},
            })
            env = {} if mode == "bwrap" else {"TMPDIR": workdir, "HOME": workdir}
            with open(out_path, "wb") as out, open(err_path, "wb") as err:
                proc = subprocess.Popen(
                    argv, stdin=subprocess.PIPE, stdout=out, stderr=err, env=env,
                    cwd="/" if mode == "bwrap" else workdir, pass_fds=(w,), start_new_session=True)
            os.close(w)
            w = -1
            lines, timed_out = _talk(proc, request, r, limits.wall_seconds * n + 5)
        finally:
            if w != -1:
                os.close(w)
            os.close(r)
        stdout = _tail(out_path)
        stderr = _tail(err_path)
        too_big = any(os.path.getsize(p) >= limits.output_bytes for p in (out_path, err_path))
    finally:
        shutil.rmtree(host_tmp, ignore_errors=True)
    results = []
    for line in lines:
        tag, _, body = line.partition(" ")
        if tag != nonce:
            continue
        try:
            d = json.loads(body)
            results.append(CaseResult(bool(d["passed"]), d.get("error")))
        except (ValueError, KeyError, TypeError):
            continue
    if len(results) < len(cases):
        why = _process_error(proc.returncode, timed_out, too_big, mode, limits, stderr)
        results += [CaseResult(False, why)] * (len(cases) - len(results))
    results = results[: len(cases)]
    if too_big:
        results = [CaseResult(False, "output too large") if r.passed or r.error is None else r for r in results]
    return SandboxRun(results, time.perf_counter() - t0, mode, stdout, stderr)


def _talk(proc: subprocess.Popen, request: str, r: int, deadline_s: float) -> tuple[list[str], bool]:
    """Send the request, collect result lines until the process exits or
    the deadline passes (then kill its process group)."""
    import selectors

    try:
        proc.stdin.write(request.encode())
        proc.stdin.close()
    except (BrokenPipeError, OSError):
        pass
    buf = b""
    sel = selectors.DefaultSelector()
    sel.register(r, selectors.EVENT_READ)
    end = time.monotonic() + deadline_s
    timed_out = False
    try:
        while True:
            left = end - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            if not sel.select(timeout=min(left, 0.5)):
                if proc.poll() is not None:
                    break
                continue
            chunk = os.read(r, 65536)
            if not chunk:
                try:  # every holder of the write end is gone: let it exit on its own
                    proc.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    pass
                break
            buf += chunk
            if len(buf) > 1 << 20:
                break  # a flood on the result pipe: not ours
    finally:
        sel.close()
        _kill_group(proc)
    return buf.decode("utf-8", "replace").splitlines(), timed_out


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _process_error(rc: int | None, timed_out: bool, too_big: bool, mode: str, limits: Limits, stderr: str) -> str:
    if timed_out:
        return f"timeout (over {limits.wall_seconds:g}s wall clock)"
    if too_big:
        return "output too large"
    sig = -rc if rc is not None and rc < 0 else (rc - 128 if mode == "bwrap" and rc and rc > 128 else None)
    if sig == signal.SIGXCPU:
        return f"timeout (over {limits.cpu_seconds}s of CPU)"
    if sig == signal.SIGXFSZ:
        return "output too large"
    if sig:
        return f"killed by signal {sig}"
    last = stderr.strip().splitlines()[-1:] or [""]
    if "MemoryError" in last[0]:
        return f"memory (over {limits.memory_mb} MB)"
    return f"exited before the tests finished (exit code {rc}){': ' + last[0][:200] if last[0] else ''}"


def _tail(path: str, n: int = 2000) -> str:
    with open(path, "rb") as fh:
        fh.seek(max(0, os.path.getsize(path) - n))
        return fh.read().decode("utf-8", "replace")
