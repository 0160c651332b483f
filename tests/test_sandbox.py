"""The sandbox is a security boundary: each hostile program is contained,
marked with its reason, and leaves the host untouched. Every test runs in
both modes: bubblewrap (when usable here; scripts/setup.sh installs it)
and the rlimit fallback (forced). No timing assertions: only outcomes."""

import os
import socket
import threading

import pytest

from tasksieve.transforms import sandbox
from tasksieve.transforms.sandbox import Limits, run_cases

LIMITS = Limits(cpu_seconds=2, wall_seconds=3, memory_mb=256, output_bytes=16 * 1024)


def _bwrap_usable() -> bool:
    try:
        return sandbox.resolve_mode("auto") == "bwrap"
    except Exception:
        return False


MODES = [pytest.param("bwrap", marks=pytest.mark.skipif(not _bwrap_usable(), reason="bubblewrap not usable here")),
         "rlimit"]


def run(solution, tests="assert f(2) == 4", mode="rlimit", **kw):
    case = {"solution": solution, "tests": tests, "entry_point": "f", "call_check": False}
    return run_cases([case], LIMITS, mode=mode, **kw).results[0]


@pytest.mark.parametrize("mode", MODES)
def test_passing_and_failing_programs(mode):
    assert run("def f(x):\n    return 2 * x\n", mode=mode).passed
    bad = run("def f(x):\n    return x + 3\n", mode=mode)
    assert not bad.passed and "assertion failed" in bad.error and "f(2) == 4" in bad.error
    missing = run("def g(x):\n    return 4\n", mode=mode)
    assert not missing.passed and "does not define f()" in missing.error


@pytest.mark.parametrize("mode", MODES)
def test_humaneval_style_check_is_called_with_the_entry_point(mode):
    tests = "def check(candidate):\n    assert candidate(2) == 4\n    assert candidate(0) == 0\n"
    case = {"solution": "def f(x):\n    return 2 * x\n", "tests": tests, "entry_point": "f", "call_check": True}
    assert run_cases([case], LIMITS, mode=mode).results[0].passed
    case["solution"] = "def f(x):\n    return 4\n"
    res = run_cases([case], LIMITS, mode=mode).results[0]
    assert not res.passed and "candidate(0) == 0" in res.error


@pytest.fixture
def listener():
    """A TCP server on the host's loopback that records any connection."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
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
    yield srv.getsockname()[1], hits
    stop.set()
    t.join()
    srv.close()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("host", ["127.0.0.1", "1.1.1.1"])
def test_network_is_blocked(mode, host, listener):
    port, hits = listener
    if host != "127.0.0.1":
        port = 80
    prog = (f"import socket\ndef f(x):\n    s = socket.create_connection(({host!r}, {port}), timeout=2)\n"
            "    s.sendall(b'leak')\n    return 2 * x\n")
    res = run(prog, mode=mode)
    assert not res.passed and res.error == "network blocked"
    assert hits == []


@pytest.mark.parametrize("mode", MODES)
def test_writes_outside_the_temp_dir_are_blocked_inside_allowed(mode, tmp_path):
    target = f"/var/tmp/tasksieve-sandbox-test-{os.getpid()}"
    res = run(f"open({target!r}, 'w').write('x')\ndef f(x):\n    return 2 * x\n", mode=mode)
    assert not res.passed and "write outside the sandbox directory blocked" in res.error
    assert not os.path.exists(target)
    # The host's /tmp too (under bwrap the sandbox has a private /tmp, so the path does not even exist there).
    res = run(f"open({str(tmp_path / 'pwned')!r}, 'w').write('x')\ndef f(x):\n    return 2 * x\n", mode=mode)
    assert not res.passed and not (tmp_path / "pwned").exists()
    res = run("import os\nos.remove('/etc/hostname')\ndef f(x):\n    return 2 * x\n", mode=mode)
    assert not res.passed and os.path.exists("/etc/hostname")
    inside = "open('scratch.txt', 'w').write('ok')\ndef f(x):\n    return 2 * x\n"
    assert run(inside, tests="assert open('scratch.txt').read() == 'ok'\nassert f(2) == 4", mode=mode).passed


@pytest.mark.parametrize("mode", MODES)
def test_fork_bomb_is_contained(mode):
    res = run("import os\nwhile True:\n    os.fork()\n", mode=mode)
    assert not res.passed and res.error == "process creation blocked"
    res = run("import subprocess\ndef f(x):\n    subprocess.run(['true'])\n    return 2 * x\n", mode=mode)
    assert not res.passed and "blocked" in res.error  # refused at `import subprocess` already


@pytest.mark.parametrize("mode", MODES)
def test_memory_bomb_is_contained(mode):
    res = run("x = ['a' * 10**6 for _ in range(10**4)]\ndef f(x):\n    return 2 * x\n", mode=mode)
    assert not res.passed and res.error.startswith("memory")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("prog", ["while True:\n    pass\n", "import time\ntime.sleep(600)\n",
                                  "while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass\n"],
                         ids=["busy", "sleep", "swallows_timeout"])
def test_infinite_loops_time_out(mode, prog):
    res = run(prog, mode=mode)
    assert not res.passed and res.error.startswith("timeout")


@pytest.mark.parametrize("mode", MODES)
def test_parent_environment_is_invisible(mode, monkeypatch):
    monkeypatch.setenv("TASKSIEVE_TEST_API_KEY", "s3cret-key")
    read_env = "import os\ndef f(x):\n    return os.environ.get('TASKSIEVE_TEST_API_KEY')\n"
    assert not run(read_env, tests="assert f(0) == 's3cret-key'", mode=mode).passed
    read_proc = (f"def f(x):\n    return open('/proc/{os.getpid()}/environ', 'rb').read()\n")
    assert not run(read_proc, tests="assert b's3cret-key' in f(0)", mode=mode).passed
    scan = ("import os\ndef f(x):\n    found = b''\n    for p in os.listdir('/proc'):\n"
            "        try:\n            found += open('/proc/%s/environ' % p, 'rb').read()\n"
            "        except Exception:\n            pass\n    return found\n")
    assert not run(scan, tests="assert b's3cret-key' in f(0)", mode=mode).passed


@pytest.mark.parametrize("mode", MODES)
def test_output_flood_is_capped(mode):
    res = run("print('x' * 10**6)\ndef f(x):\n    return 2 * x\n", mode=mode)
    assert not res.passed and res.error == "output too large"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("prog", ["import os\nos._exit(0)\n", "import sys\nsys.exit(0)\n",
                                  "import os\nos.write(1, b'passed')\nos._exit(0)\n"])
def test_exiting_early_is_not_a_pass(mode, prog):
    res = run(prog, mode=mode)
    assert not res.passed and "exited before the tests finished" in res.error


@pytest.mark.parametrize("mode", MODES)
def test_native_code_is_refused(mode):
    res = run("import ctypes\ndef f(x):\n    return 2 * x\n", mode=mode)
    assert not res.passed and "blocked" in res.error


@pytest.mark.parametrize("mode", MODES)
def test_each_case_gets_its_own_verdict(mode):
    cases = [{"solution": f"def f(x):\n    return {body}\n", "tests": "assert f(2) == 4", "entry_point": "f",
              "call_check": False} for body in ("2 * x", "None", "x + x")]
    assert [r.passed for r in run_cases(cases, LIMITS, mode=mode).results] == [True, False, True]


@pytest.mark.skipif(not _bwrap_usable(), reason="bubblewrap not usable here")
def test_bwrap_blocks_on_its_own_without_the_audit_hook(tmp_path, listener):
    """The kernel-enforced layer holds even if the audit hook were bypassed:
    empty network namespace, read-only root, no new processes."""
    port, hits = listener
    net = run(f"import socket\ndef f(x):\n    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n    return 4\n",
              mode="bwrap", audit_hook=False)
    assert not net.passed and "Connection refused" in net.error or "unreachable" in net.error
    assert hits == []
    target = tmp_path / "pwned"
    write = run(f"open({str(target)!r}, 'w').write('x')\ndef f(x):\n    return 4\n", mode="bwrap", audit_hook=False)
    assert not write.passed and not target.exists()
    fork = run("import os\nwhile True:\n    os.fork()\n", mode="bwrap", audit_hook=False)
    assert not fork.passed and "Resource temporarily unavailable" in fork.error


def test_unknown_mode_is_an_error():
    with pytest.raises(ValueError):
        sandbox.resolve_mode("docker")
