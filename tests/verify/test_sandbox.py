"""The sandbox is a security boundary: each hostile program is contained,
marked with its reason, and leaves the host untouched. Every test runs in
both modes: bubblewrap (when usable here; scripts/setup.sh installs it)
and the rlimit fallback (forced; as root it runs as nobody with an
interpreter nobody can read). Tests marked "kernel" switch the audit hook
off, to show what the kernel layers hold on their own. No timing
assertions: only outcomes."""

import contextlib
import os
import shutil
import signal
import socket
import tempfile
import threading
import time

import pytest

from tasksieve.transforms.verify.sandbox import pool as sandbox_pool
from tasksieve.transforms.verify.sandbox import runner as sandbox
from tasksieve.transforms.verify.sandbox.runner import Limits, run_cases

LIMITS = Limits(cpu_seconds=2, wall_seconds=3, memory_mb=256, output_bytes=16 * 1024)


def _bwrap_usable() -> bool:
    try:
        return sandbox.resolve_mode("auto") == "bwrap"
    except Exception:
        return False


def _rlimit_usable() -> bool:
    try:
        return sandbox.resolve_mode("rlimit") == "rlimit"
    except sandbox.NoSafeSandbox:
        return False


MODES = [
    pytest.param("bwrap", marks=pytest.mark.skipif(not _bwrap_usable(), reason="bubblewrap not usable here")),
    pytest.param("rlimit", marks=pytest.mark.skipif(not _rlimit_usable(), reason="no safe fallback here")),
]


def run(solution, tests="assert f(2) == 4", mode="rlimit", **kw):
    case = {"solution": solution, "tests": tests, "entry_point": "f", "call_check": False}
    return run_cases([case], LIMITS, mode=mode, **kw).results[0]


@pytest.mark.parametrize("mode", MODES)
def test_passing_and_failing_programs(mode):
    assert run("def f(x):\n    return 2 * x\n", mode=mode).passed
    bad = run("def f(x):\n    return x + 3\n", mode=mode)
    assert not bad.passed and bad.error == "wrong_answer (tests line 1: assert f(2) == 4)"
    missing = run("def g(x):\n    return 4\n", mode=mode)
    assert not missing.passed and missing.error == "no_entry_point"
    raises = run("def f(x):\n    raise ValueError('my secret text')\n", mode=mode)
    assert not raises.passed and raises.error.startswith("crash: ValueError") and "secret" not in raises.error


@pytest.mark.parametrize("mode", MODES)
def test_humaneval_style_check_is_called_with_the_entry_point(mode):
    tests = "def check(candidate):\n    assert candidate(2) == 4\n    assert candidate(0) == 0\n"
    case = {"solution": "def f(x):\n    return 2 * x\n", "tests": tests, "entry_point": "f", "call_check": True}
    assert run_cases([case], LIMITS, mode=mode).results[0].passed
    case["solution"] = "def f(x):\n    return 4\n"
    res = run_cases([case], LIMITS, mode=mode).results[0]
    assert not res.passed and "candidate(0) == 0" in res.error


@contextlib.contextmanager
def recording(srv):
    """Accept connections on a listening socket in a thread, recording what
    each sends; yields the list of what was received."""
    srv.listen(5)
    srv.settimeout(0.2)
    hits, stop = [], threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
                hits.append(conn.recv(100))
                conn.close()
            except OSError:
                pass

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield hits
    finally:
        stop.set()
        t.join()
        srv.close()


@pytest.fixture
def listener():
    """A TCP server on the host's loopback that records any connection."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    with recording(srv) as hits:
        yield srv.getsockname()[1], hits


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("host", ["127.0.0.1", "1.1.1.1"])
def test_network_is_blocked(mode, host, listener):
    port, hits = listener
    if host != "127.0.0.1":
        port = 80
    prog = (
        f"import socket\ndef f(x):\n    s = socket.create_connection(({host!r}, {port}), timeout=2)\n"
        "    s.sendall(b'leak')\n    return 2 * x\n"
    )
    res = run(prog, mode=mode)
    assert not res.passed and res.error == "blocked: network"
    assert hits == []


@pytest.mark.parametrize("mode", MODES)
def test_writes_outside_the_temp_dir_are_blocked_inside_allowed(mode, tmp_path):
    target = f"/var/tmp/tasksieve-sandbox-test-{os.getpid()}"
    res = run(f"open({target!r}, 'w').write('x')\ndef f(x):\n    return 2 * x\n", mode=mode)
    assert not res.passed and res.error == "blocked: write"
    assert not os.path.exists(target)
    # The host's /tmp too (under bwrap the sandbox has a private /tmp, so the path does not even exist there).
    res = run(f"open({str(tmp_path / 'pwned')!r}, 'w').write('x')\ndef f(x):\n    return 2 * x\n", mode=mode)
    assert not res.passed and not (tmp_path / "pwned").exists()
    res = run("import os\nos.remove('/etc/hostname')\ndef f(x):\n    return 2 * x\n", mode=mode)
    assert not res.passed and os.path.exists("/etc/hostname")
    inside = "open('scratch.txt', 'w').write('ok')\ndef f(x):\n    return open('scratch.txt').read()\n"
    assert run(inside, tests="assert f(2) == 'ok'", mode=mode).passed


@pytest.mark.parametrize("mode", MODES)
def test_fork_bomb_is_contained(mode):
    res = run("import os\ndef f(x):\n    while True:\n        os.fork()\n", mode=mode)
    assert not res.passed and res.error == "blocked: process"
    res = run("import subprocess\ndef f(x):\n    subprocess.run(['true'])\n    return 2 * x\n", mode=mode)
    assert not res.passed and res.error == "blocked: native"  # refused at `import subprocess` already


@pytest.mark.parametrize("mode", MODES)
def test_memory_bomb_is_contained(mode):
    res = run("def f(x):\n    y = ['a' * 10**6 for _ in range(10**4)]\n    return 2 * x\n", mode=mode)
    assert not res.passed and res.error == "memory"


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "prog",
    [
        "while True:\n    pass\n",
        "import time\ntime.sleep(600)\n",
        "while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass\n",
    ],
    ids=["busy", "sleep", "swallows_timeout"],
)
def test_infinite_loops_time_out(mode, prog):
    res = run(prog, mode=mode)
    assert not res.passed and res.error.startswith("timeout")


@pytest.mark.parametrize("mode", MODES)
def test_parent_environment_is_invisible(mode, monkeypatch):
    monkeypatch.setenv("TASKSIEVE_TEST_API_KEY", "s3cret-key")
    read_env = "import os\ndef f(x):\n    return os.environ.get('TASKSIEVE_TEST_API_KEY')\n"
    assert not run(read_env, tests="assert f(0) == 's3cret-key'", mode=mode).passed
    read_proc = f"def f(x):\n    return open('/proc/{os.getpid()}/environ', 'rb').read()\n"
    assert not run(read_proc, tests="assert b's3cret-key' in f(0)", mode=mode).passed
    scan = (
        "import os\ndef f(x):\n    found = b''\n    for p in os.listdir('/proc'):\n"
        "        try:\n            found += open('/proc/%s/environ' % p, 'rb').read()\n"
        "        except Exception:\n            pass\n    return found\n"
    )
    assert not run(scan, tests="assert b's3cret-key' in f(0)", mode=mode).passed


@pytest.mark.parametrize("mode", MODES)
def test_output_flood_is_capped(mode):
    res = run("print('x' * 10**6)\ndef f(x):\n    return 2 * x\n", mode=mode)
    assert not res.passed and res.error == "output_too_large"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "prog",
    ["import os\nos._exit(0)\n", "import sys\nsys.exit(0)\n", "import os\nos.write(1, b'passed')\nos._exit(0)\n"],
)
def test_exiting_early_is_not_a_pass(mode, prog):
    res = run(prog, mode=mode)
    assert not res.passed and res.error in ("exited_early", "crash: SystemExit")


@pytest.mark.parametrize("mode", MODES)
def test_native_code_is_refused(mode):
    res = run("import ctypes\ndef f(x):\n    return 2 * x\n", mode=mode)
    assert not res.passed and "blocked" in res.error


@pytest.mark.parametrize("mode", MODES)
def test_each_case_gets_its_own_verdict(mode):
    cases = [
        {
            "solution": f"def f(x):\n    return {body}\n",
            "tests": "assert f(2) == 4",
            "entry_point": "f",
            "call_check": False,
        }
        for body in ("2 * x", "None", "x + x")
    ]
    assert [r.passed for r in run_cases(cases, LIMITS, mode=mode).results] == [True, False, True]


def test_unknown_mode_is_an_error():
    with pytest.raises(ValueError):
        sandbox.resolve_mode("docker")


# --- the boundary, as the acceptance names it ------------------------------------------


@pytest.fixture
def unix_listener(tmp_path):
    """A filesystem unix socket on the host, open to everyone, that records
    anything sent to it."""
    path = str(tmp_path / "host.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    os.chmod(path, 0o777)
    os.chmod(tmp_path, 0o755)
    with recording(srv) as hits:
        yield path, hits


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("hook", [True, False], ids=["with_hook", "kernel_only"])
def test_host_unix_socket_receives_nothing(mode, hook, unix_listener):
    path, hits = unix_listener
    prog = (
        "import socket\ndef f(x):\n    s = socket.socket(socket.AF_UNIX)\n"
        f"    s.connect({path!r})\n    s.sendall(b'leak')\n    return 2 * x\n"
    )
    res = run(prog, mode=mode, audit_hook=hook)
    assert not res.passed
    assert hits == []


@pytest.fixture
def host_secret(tmp_path_factory):
    """A world-readable file outside the sandbox's work dir, in a world-
    traversable folder (not under the test's private tmp)."""
    d = tempfile.mkdtemp(prefix="tasksieve-host-", dir="/var/tmp")
    os.chmod(d, 0o755)
    path = os.path.join(d, "secret.txt")
    with open(path, "w") as fh:
        fh.write("host-secret-42")
    os.chmod(path, 0o644)
    yield path
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("mode", MODES)
def test_world_readable_host_file_cannot_be_read(mode, host_secret):
    prog = f"def f(x):\n    try:\n        return open({host_secret!r}).read()\n    except BaseException as e:\n        return 'refused'\n"
    assert not run(prog, tests="assert f(0) == 'host-secret-42'", mode=mode).passed
    assert run(prog, tests="assert f(0) == 'refused'", mode=mode).passed  # the attempt ran; the read failed
    # The project checkout is host data too.
    checkout = os.path.abspath(__file__)
    prog2 = f"def f(x):\n    try:\n        return len(open({checkout!r}).read())\n    except BaseException:\n        return -1\n"
    assert run(prog2, tests="assert f(0) == -1", mode=mode).passed


@pytest.mark.skipif(not _bwrap_usable(), reason="bubblewrap not usable here")
def test_bwrap_hides_host_files_without_the_audit_hook(host_secret, tmp_path):
    """The mount namespace holds, not the hook: the file is not even there."""
    prog = f"import os\ndef f(x):\n    return os.path.exists({host_secret!r}) or os.path.exists('/work') or os.path.exists('/root/.cache')\n"
    assert run(prog, tests="assert f(0) is False", mode="bwrap", audit_hook=False).passed
    target = tmp_path / "pwned"
    write = run(f"def f(x):\n    open({str(target)!r}, 'w').write('x')\n    return 4\n", mode="bwrap", audit_hook=False)
    assert not write.passed and not target.exists()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("hook", [True, False], ids=["with_hook", "kernel_only"])
def test_attempt_never_runs_as_root(mode, hook):
    prog = "import os\ndef f(x):\n    return [os.getuid(), os.geteuid(), os.getgid()]\n"
    assert run(prog, tests="assert 0 not in f(0)", mode=mode, audit_hook=hook).passed
    caps = (
        "def f(x):\n    for line in open('/proc/self/status'):\n        if line.startswith('CapEff'):\n"
        "            return int(line.split()[1], 16)\n"
    )
    assert run(caps, tests="assert f(0) == 0", mode=mode, audit_hook=hook).passed


def _sandboxed_processes() -> list[int]:
    """PIDs of this process's descendants started by the sandbox (their
    command line holds the boot program), but for the pooled workers
    themselves (a child one forks for a case counts). Only descendants: tests running
    beside this one (pytest-xdist, another checkout) start sandboxes too.
    Under _subreaper() an orphan (a daemon that left its parent) stays a
    descendant of this process instead of moving to init."""
    parent = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/stat", "rb") as fh:
                    parent[int(p)] = int(fh.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    me, found = os.getpid(), []
    pooled = sandbox_pool.worker_processes()  # the pooled workers live on; a child they forked for a case does not
    for pid in parent:
        q, seen = pid, set()
        while q in parent and q not in seen and q != me:
            seen.add(q)
            q = parent[q]
        if q != me or pid == me or pid in pooled:
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if b"sandbox_guard" in fh.read():
                    found.append(pid)
        except OSError:
            pass
    return found


@contextlib.contextmanager
def _subreaper():
    """This process adopts its orphaned descendants (PR_SET_CHILD_SUBREAPER)
    while the block runs, so a sandbox process that escaped its group is
    still found among them."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(36, 1, 0, 0, 0)
    try:
        yield
    finally:
        libc.prctl(36, 0, 0, 0, 0)


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("hook", [True, False], ids=["with_hook", "kernel_only"])
def test_no_process_outlives_the_verdict(mode, hook):
    daemon = (
        "import os\ndef f(x):\n    try:\n        if os.fork() == 0:\n            os.setsid()\n"
        "            import time\n            time.sleep(600)\n    except OSError:\n        pass\n    return 2 * x\n"
    )
    sleeper = "import time\ntime.sleep(600)\ndef f(x):\n    return 2 * x\n"
    with _subreaper():
        assert run(daemon, mode=mode, audit_hook=hook).passed  # the fork failed; the function still answered
        assert run(sleeper, mode=mode, audit_hook=hook).error.startswith("timeout")
        assert _sandboxed_processes() == []


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("hook", [True, False], ids=["with_hook", "kernel_only"])
def test_the_parent_cannot_be_signalled(mode, hook):
    got = []
    old = signal.signal(signal.SIGUSR1, lambda *a: got.append(1))
    try:
        prog = (
            f"import os, signal\ndef f(x):\n    for pid in ({os.getpid()}, {os.getppid()}, -1, 1):\n"
            "        try:\n            os.kill(pid, signal.SIGUSR1)\n        except BaseException:\n            pass\n"
            "    return 2 * x\n"
        )
        run(prog, mode=mode, audit_hook=hook)
        time.sleep(0.2)
    finally:
        signal.signal(signal.SIGUSR1, old)
    assert got == []


@pytest.mark.parametrize("mode", MODES)
def test_hidden_tests_never_reach_the_attempt(mode):
    """The attempt looks for the tests everywhere it can: its own frames,
    every module, /proc of other processes, its stdin. Nothing holds them."""
    prog = (
        "import sys, os\ndef f(x):\n    seen = ''\n    fr = sys._getframe()\n    while fr:\n"
        "        seen += repr(fr.f_locals) + repr(fr.f_globals)\n        fr = fr.f_back\n"
        "    for m in list(sys.modules.values()):\n        seen += repr(getattr(m, '__dict__', ''))\n"
        "    try:\n        pids = os.listdir('/proc')\n    except BaseException:\n        pids = []\n"
        "    for p in pids:\n        try:\n            seen += open('/proc/%s/cmdline' % p).read()\n"
        "        except BaseException:\n            pass\n"
        "    return '1377-DETCEPXE-TERCES'[::-1] in seen\n"
    )  # spelled backwards: not in its own source
    assert run(prog, tests="expected = 'SECRET-EXPECTED-7731'\nassert f(0) is False", mode=mode).passed


@pytest.mark.skipif(os.geteuid() != 0, reason="the root refusal needs root")
def test_fallback_refuses_root_unless_the_unsafe_mode_is_named(monkeypatch):
    """Where no interpreter is readable by nobody, the fallback would have to
    run attempts as root: it refuses, `auto` finds no safe sandbox, and code
    tasks are dropped before sampling. Naming `unsafe-root` runs them."""
    from tasksieve.schemas.config import VerifyConfig
    from tasksieve.transforms.verify.sanity import check_verifier
    from tasksieve.transforms.verify.verifiers import verify_code

    monkeypatch.setattr(sandbox, "_CACHE", {})
    monkeypatch.setattr(sandbox, "_python_candidates", lambda: ["/nonexistent/python3"])
    real_which = shutil.which
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None if name == "bwrap" else real_which(name))
    with pytest.raises(sandbox.NoSafeSandbox, match="cannot run as nobody"):
        sandbox.resolve_mode("rlimit")
    with pytest.raises(sandbox.NoSafeSandbox):
        sandbox.resolve_mode("auto")
    assert "no_safe_sandbox" in sandbox.describe("auto")
    task = {
        "domain": "code",
        "entry_point": "f",
        "prompt": "double x",
        "tests": "assert f(2) == 4",
        "reference_solution": "def f(x):\n    return 2 * x\n",
    }
    verdict = verify_code(task, "def f(x):\n    return 2 * x\n", VerifyConfig())
    assert not verdict["passed"] and verdict["error"] == "no_safe_sandbox"
    sane = check_verifier(task, VerifyConfig())
    assert sane["broken"] and "no_safe_sandbox" in sane["reasons"]
    assert sandbox.resolve_mode("unsafe-root") == "unsafe-root"
    who = "import os\ndef f(x):\n    return os.getuid()\n"
    res = run_cases([{"solution": who, "tests": "assert f(0) == 0", "entry_point": "f"}], LIMITS, mode="unsafe-root")
    assert res.results[0].passed  # named, and it does what its name says


@pytest.mark.skipif(not _bwrap_usable(), reason="bubblewrap not usable here")
def test_bwrap_cases_run_in_pooled_sandboxes_by_default():
    """Every bwrap test above ran on the pooled path (pool.py): the default.
    The per-case path stays for the fallback and as the pool's own fallback."""
    assert sandbox.POOLED and not sandbox._POOL_BROKEN
    assert run("def f(x):\n    return 2 * x\n", mode="bwrap").passed
    assert len(sandbox_pool.worker_pids()) >= 2  # an attempt worker and a harness worker
