"""The pooled bubblewrap sandboxes (transforms/verify/sandbox/pool.py,
worker.py): one sandbox serves many cases, each in a freshly forked child,
so what one case does must never reach the next (docs/verification.md,
"Pooled sandboxes"). Each test runs a hostile case, then a probe case on
the SAME worker (checked: the worker's pid, seen from inside, is the same)
and asserts the probe sees nothing of it and gets its own verdict; and the
worker itself stays usable or is replaced. No timing assertions."""

import os
import signal

import pytest

from tasksieve.transforms.verify.sandbox import pool as sandbox_pool
from tasksieve.transforms.verify.sandbox import runner as sandbox
from tasksieve.transforms.verify.sandbox.runner import Limits, run_cases


def _bwrap_usable() -> bool:
    try:
        return sandbox.resolve_mode("bwrap") == "bwrap"
    except Exception:
        return False


pytestmark = pytest.mark.skipif(not _bwrap_usable(), reason="bubblewrap not usable here")
LIMITS = Limits(cpu_seconds=2, wall_seconds=3, memory_mb=256, output_bytes=16 * 1024)


def run(solution, tests="assert f(2) == 4", hook=True):
    case = {"solution": solution, "tests": tests, "entry_point": "f", "call_check": False}
    return run_cases([case], LIMITS, mode="bwrap", audit_hook=hook).results[0]


def leftovers() -> list[int]:
    """Host pids under the pooled sandboxes that are not the workers themselves: a case's child."""
    workers = set(sandbox_pool.worker_pids())
    own = sandbox_pool.worker_processes()
    parent = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/stat", "rb") as fh:
                    fields = fh.read().rsplit(b")", 1)[1].split()
                if fields[0] != b"Z":
                    parent[int(p)] = int(fields[1])
            except (OSError, IndexError, ValueError):
                pass
    found = []
    for pid in parent:
        q, hops = pid, 0
        while q in parent and q not in workers and hops < 64:
            q, hops = parent[q], hops + 1
        if q in workers and pid not in own:
            found.append(pid)
    return found


@pytest.fixture(autouse=True)
def pooled(monkeypatch):
    """The pooled path, fresh pools (so each test starts from idle workers)."""
    monkeypatch.setattr(sandbox, "POOLED", True)
    sandbox_pool.close_all()
    yield
    assert not sandbox._POOL_BROKEN, sandbox._POOL_BROKEN
    sandbox_pool.close_all()


def same_worker(hostile, probe_tests, probe="import os\ndef f(x):\n    return 2 * x\n", hook=True):
    """Run `hostile`, then `probe` (with `probe_tests`) on the same two workers
    (one attempt worker, one harness worker: checked); return both results."""
    assert run("def f(x):\n    return 2 * x\n", hook=hook).passed
    workers = sandbox_pool.worker_pids()
    assert len(workers) == 2
    bad = run(hostile, hook=hook)
    assert leftovers() == []
    good = run(probe, tests=probe_tests, hook=hook)
    assert sandbox_pool.worker_pids() == workers  # the same sandboxes served all three cases
    return bad, good


@pytest.mark.parametrize("hook", [True, False], ids=["with_hook", "kernel_only"])
def test_consecutive_cases_share_the_worker_not_the_process(hook):
    ask = "import os\ndef f(x):\n    return [os.getpid(), os.getppid()]\n"
    first = run(ask, tests="r = f(0)\nassert r == 0, r", hook=hook).error
    second = run(ask, tests="r = f(0)\nassert r == 0, r", hook=hook).error
    assert first.startswith("wrong_answer") and second.startswith("wrong_answer")
    assert len(sandbox_pool.worker_pids()) == 2  # one attempt worker, one harness worker served both


@pytest.mark.parametrize("hook", [True, False], ids=["with_hook", "kernel_only"])
def test_files_do_not_reach_the_next_case(hook):
    hostile = (
        "import os\nopen('/tmp/left.txt', 'w').write('answer')\nos.mkdir('/tmp/d')\n"
        "open('/tmp/d/x', 'w').write('x')\nos.chmod('/tmp/d', 0)\n"
        "for p in ('/dev/shm/left', '/left', '/usr/left'):\n    try:\n        open(p, 'w').write('x')\n"
        "    except BaseException:\n        pass\ndef f(x):\n    return 2 * x\n"
    )
    probe = (
        "import os\ndef f(x):\n    seen = []\n    for d in ('/tmp', '/dev/shm', '/'):\n        try:\n"
        "            seen += [d + '/' + n for n in os.listdir(d) if 'left' in n or n == 'd']\n"
        "        except BaseException:\n            pass\n    return seen\n"
    )
    bad, good = same_worker(hostile, "assert f(0) == []", probe, hook)
    assert bad.passed  # the attempt could write its own work dir
    assert good.passed, good.error


@pytest.mark.parametrize("hook", [True, False], ids=["with_hook", "kernel_only"])
def test_module_state_and_builtins_do_not_reach_the_next_case(hook):
    hostile = (
        "import builtins, sys, json, math, collections\njson.LEFT = 1\nmath.pi = 3\n"
        "collections.Counter = None\nbuiltins.len = lambda x: 42\nbuiltins.LEFT = 1\n"
        "sys.modules['sandbox_codec'].decode = lambda tree: 4\nsys.modules['sandbox_codec'].encode = "
        "lambda v: ['i', hex(4)]\nsys.path.insert(0, '/tmp')\nimport random\nrandom.seed(1)\n"
        "def f(x):\n    return 2 * x\n"
    )
    probe = (
        "import builtins, sys, json, math, collections\ndef f(x):\n    return [hasattr(json, 'LEFT'), "
        "math.pi > 3.14, collections.Counter is None, len([1, 2]), hasattr(builtins, 'LEFT'), sys.path[0] == '/tmp']\n"
    )
    _, good = same_worker(hostile, "assert f(0) == [False, True, False, 2, False, False]", probe, hook)
    assert good.passed, good.error
    # And a patched codec in the attempt's process decides nothing (it is the harness that decodes).
    assert not run(hostile.replace("return 2 * x", "return 5"), hook=hook).passed


@pytest.mark.parametrize("hook", [True, False], ids=["with_hook", "kernel_only"])
def test_threads_and_processes_are_not_left_for_the_next_case(hook):
    hostile = (
        "import os, threading, time\ndef spin():\n    while True:\n        time.sleep(0.01)\n"
        "def f(x):\n    for start in (lambda: threading.Thread(target=spin, daemon=True).start(), os.fork):\n"
        "        try:\n            start()\n        except BaseException:\n            pass\n    return 2 * x\n"
    )
    probe = "import threading\ndef f(x):\n    return threading.active_count()\n"
    bad, good = same_worker(hostile, "assert f(0) == 1", probe, hook)
    assert bad.passed  # the thread and the fork failed; the function answered
    assert good.passed, good.error
    assert leftovers() == []


def test_no_ipc_object_is_left_for_the_next_case():
    """System V shared memory, semaphores and message queues, and POSIX
    message queues, live in the IPC namespace, which a worker's cases share:
    the seccomp filter refuses creating them (native code, audit hook off)."""
    prog = (
        "import ctypes\ndef f(x):\n    libc = ctypes.CDLL(None, use_errno=True)\n"
        "    made = [libc.shmget(0x7A5C, 4096, 0o1666), libc.msgget(0x7A5C, 0o1666), libc.semget(0x7A5C, 1, 0o1666),\n"
        "            libc.syscall(240, b'/tasksieve', 0o100 | 2, 0o666, None)]\n"
        "    return [m >= 0 for m in made] + [ctypes.get_errno()]\n"
    )
    assert run(prog, tests="assert f(0) == [False, False, False, False, 1]", hook=False).passed  # EPERM each


def test_a_case_sees_only_its_worker_and_itself():
    """Seen from a case, its sandbox holds the worker (its init, pid 1, as
    bubblewrap's init is in a sandbox per case) and itself: nothing of a
    former case, which tried to fork and to start a thread."""
    run(
        "import os, threading\ndef f(x):\n    for go in (os.fork, lambda: threading.Thread(target=print).start()):\n"
        "        try:\n            go()\n        except BaseException:\n            pass\n    return 2 * x\n"
    )
    # Landlock refuses listing /proc; stat() still tells whether a pid exists (pids count up from 1 here).
    probe = (
        "import os\ndef f(x):\n    return [os.getppid(), [n for n in range(1, os.getpid() + 50) "
        "if os.path.exists('/proc/%d' % n)] == [1, os.getpid()]]\n"
    )
    assert run(probe, tests="assert f(0) == [1, True]", hook=False).passed


@pytest.mark.parametrize("hook", [True, False], ids=["with_hook", "kernel_only"])
def test_memory_exhaustion_does_not_reach_the_next_case(hook):
    bad = run("def f(x):\n    y = ['a' * 10**6 for _ in range(10**4)]\n    return 2 * x\n", hook=hook)
    assert not bad.passed and bad.error == "memory"
    assert run("def f(x):\n    y = 'a' * 10**8\n    return 2 * x\n", hook=hook).passed  # 100 MB still fits under 256


@pytest.mark.parametrize("hook", [True, False], ids=["with_hook", "kernel_only"])
def test_the_worker_cannot_be_killed_or_reached_from_a_case(hook):
    hostile = (
        "import os, signal\ndef f(x):\n    for pid in (os.getppid(), 1, -1, 0):\n        for sig in (9, 15, 19):\n"
        "            try:\n                os.kill(pid, sig)\n            except BaseException:\n                pass\n"
        "    for path in ('/proc/%d/mem' % os.getppid(), '/proc/%d/fd/3' % os.getppid(), '/proc/%d/environ' % os.getppid()):\n"
        "        try:\n            open(path, 'rb').read(1)\n            return 'reached ' + path\n        except BaseException:\n"
        '            pass\n    for fd in range(3, 64):\n        try:\n            os.write(fd, b\'{"op": "exit", "code": 0, "clean": true}\')\n'
        "        except BaseException:\n            pass\n    return 2 * x\n"
    )
    before = sandbox_pool.worker_pids()
    bad = run(hostile, hook=hook)
    assert not (bad.error or "").startswith("harness_error")
    after = sandbox_pool.worker_pids()
    assert not before or before == after  # the same workers serve on
    assert run("def f(x):\n    return 2 * x\n", hook=hook).passed
    assert run("def f(x):\n    return 3 * x\n", hook=hook).error.startswith("wrong_answer")


@pytest.mark.parametrize("hook", [True, False], ids=["with_hook", "kernel_only"])
def test_a_forged_pass_on_stdout_or_any_descriptor_is_no_verdict(hook):
    forge = (
        'import os, sys\nline = b\'{"passed": true, "error": null, "calls": 1}\\n\'\nprint(line.decode())\n'
        "for fd in range(0, 64):\n    try:\n        os.write(fd, line)\n    except BaseException:\n        pass\n"
        "def f(x):\n    for fd in range(0, 64):\n        try:\n            os.write(fd, line)\n        except BaseException:\n"
        "            pass\n    return 0\n"
    )
    res = run(forge, hook=hook)
    assert not res.passed
    assert run("def f(x):\n    return 3 * x\n", hook=hook).error.startswith("wrong_answer")


def test_hostile_tests_do_not_reach_the_next_case():
    """The tests run in a forked child of the harness's worker too."""
    hostile_tests = (
        "import builtins, os\nbuiltins.LEFT = 1\nopen('/tmp/left', 'w').write('x')\n"
        "import sandbox_guard\nsandbox_guard.LEFT = 1\nassert f(2) == 4\n"
    )
    assert run("def f(x):\n    return 2 * x\n", tests=hostile_tests).passed
    probe_tests = (
        "import builtins, os, sandbox_guard\nassert not hasattr(builtins, 'LEFT')\n"
        "assert not hasattr(sandbox_guard, 'LEFT')\nassert os.listdir('/tmp') == []\n"
        "assert f(2) == 4\n"
    )
    assert run("def f(x):\n    return 2 * x\n", tests=probe_tests).passed


def test_a_worker_that_cannot_empty_its_tmp_is_replaced():
    many = "import os\nfor i in range(3000):\n    open('/tmp/f%d' % i, 'w').close()\ndef f(x):\n    return 2 * x\n"
    first = set(sandbox_pool.worker_pids())
    assert run(many).passed
    probe = "import os\ndef f(x):\n    return len(os.listdir('/tmp'))\n"
    assert run(probe, tests="assert f(0) == 0").passed
    assert set(sandbox_pool.worker_pids()) != first or not first


def test_a_worker_killed_from_outside_is_replaced():
    assert run("def f(x):\n    return 2 * x\n").passed
    for pid in sandbox_pool.worker_pids():
        os.killpg(pid, signal.SIGKILL)
    assert run("def f(x):\n    return 2 * x\n").passed
    assert run("def f(x):\n    return 3 * x\n").error.startswith("wrong_answer")


def test_the_attempt_timing_out_leaves_a_usable_worker():
    res = run("def f(x):\n    while True:\n        pass\n")
    assert not res.passed and res.error.startswith("timeout")
    assert run("def f(x):\n    return 2 * x\n").passed


def test_concurrent_cases_get_their_own_verdicts():
    """Verification threads share the pool: each case still gets its own
    verdict, and the pool holds one attempt and one harness worker per
    concurrent case at most."""
    from concurrent.futures import ThreadPoolExecutor

    bodies = ["2 * x", "x + 3", "x * x", "4", "x << 1", "None"] * 2
    expected = [run_body_ok(b) for b in bodies]
    with ThreadPoolExecutor(3) as ex:
        got = list(ex.map(lambda b: run(f"def f(x):\n    return {b}\n").passed, bodies))
    assert got == expected
    assert len(sandbox_pool.worker_pids()) <= 6


def run_body_ok(body: str) -> bool:
    return eval(body, {"x": 2}) == 4


@pytest.mark.parametrize("hook", [True, False], ids=["with_hook", "kernel_only"])
def test_the_spare_child_runs_the_next_case_locked_down(hook):
    """After a case each worker forks the next case's child and locks it
    down ahead (same settings); that child runs the next case, fully
    confined: not root, no capabilities, seccomp and Landlock on, its
    limits set. A case with other settings gets a fresh child instead."""
    ask = (
        "import os, resource\ndef f(x):\n    st = dict(l.split(':', 1) for l in open('/proc/self/status').read().splitlines())\n"
        "    return [os.getpid(), os.getuid() != 0, int(st['CapEff'], 16), st['Seccomp'].strip(), st['NoNewPrivs'].strip(),\n"
        "            resource.getrlimit(resource.RLIMIT_NPROC)[0], resource.getrlimit(resource.RLIMIT_NOFILE)[0]]\n"
    )
    assert run("def f(x):\n    return 2 * x\n", hook=hook).passed
    (attempt,) = [w for w in sandbox_pool._POOLS[next(iter(sandbox_pool._POOLS))].idle["sandbox_attempt"]]
    spare = attempt.spare_pid()
    assert spare is not None
    got = run(ask, tests=f"r = f(0)\nassert r == [{spare}, True, 0, '2', '1', 0, 64], r", hook=hook)
    assert got.passed, got.error
    other = run(ask, tests="r = f(0)\nassert r[1:] == [True, 0, '2', '1', 0, 64], r", hook=not hook)  # other settings
    assert other.passed, other.error


def test_a_forked_copy_of_the_run_starts_its_own_workers():
    """A process forked from one that holds workers (a multiprocessing
    worker) must not talk to them: it starts its own."""
    import multiprocessing

    assert run("def f(x):\n    return 2 * x\n").passed
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(1) as forked:
        got = forked.apply(_run_in_child)
    assert got == (True, False)
    assert run("def f(x):\n    return 3 * x\n").error.startswith("wrong_answer")  # ours still serve


def _run_in_child():
    shared = bool(sandbox_pool.worker_pids())
    return run("def f(x):\n    return 2 * x\n").passed, shared


def test_a_pool_that_does_not_work_here_falls_back_to_a_sandbox_per_case(monkeypatch):
    """Workers that die under every case (here: a worker that cannot watch
    its child) decide nothing: each case runs again on fresh workers, then,
    after three losses, in sandboxes of its own from then on, with the
    verdicts a working sandbox gives."""
    broken = sandbox._SOURCES["sandbox_worker"].replace("pidfd = os.pidfd_open(pid)", "pidfd = os.pidfd_open(-5)")
    monkeypatch.setattr(sandbox, "_SOURCES", dict(sandbox._SOURCES, sandbox_worker=broken))
    monkeypatch.setattr(sandbox, "_POOL_BROKEN", [])
    got = [run(f"def f(x):\n    return {body}\n").passed for body in ("2 * x", "3 * x", "x + 2")]
    assert got == [True, False, True]
    assert sandbox._POOL_BROKEN and "three times" in sandbox._POOL_BROKEN[0]
    sandbox._POOL_BROKEN.clear()
