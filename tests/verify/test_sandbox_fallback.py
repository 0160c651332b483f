"""The sandbox against a hostile attempt (and hostile tests) that knows the
host: issue 48. Each cell of the matrix (who runs tasksieve: root or an
unprivileged user; which mode: bwrap or the rlimit fallback) runs tasksieve
in a child process, exactly as a run would: with an API key in its
environment from exec on (so it is in /proc/<pid>/environ, which a
monkeypatched os.environ is not), a delivery path on its command line
(`--input`), a world-readable fake delivery holding the hidden answer, and
a descriptor of that delivery left inheritable. A cell either refuses the
mode (NoSafeSandbox: code tasks are dropped with no_safe_sandbox) or holds
against every attack, with the audit hook on and off ("kernel_only").

Non-root cells run the child as `nobody` (setpriv); they need root here.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from tasksieve.transforms.verify.sandbox import runner as sandbox

pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KEY = "sk-issue48-" + "0123456789abcdef"  # the run's secret
SECRET = "HIDDEN-ANSWER-4817"  # what the delivery's hidden asserts expect

# tasksieve as a run uses it: resolve the mode, run the cases, print the outcomes.
DRIVER = r"""
import json, os, sys
from tasksieve.transforms.verify.sandbox import runner
req = json.loads(sys.stdin.read())
leaky = os.open(req["delivery"], os.O_RDONLY)
os.set_inheritable(leaky, True)  # a parent (or a library of it) that leaks a descriptor
try:
    mode = runner.resolve_mode(req["mode"])
except runner.NoSafeSandbox as e:
    print(json.dumps({"refused": str(e)}))
    sys.exit(0)
lim = runner.Limits(cpu_seconds=3, wall_seconds=6, memory_mb=256)
# With a PID namespace no other process may even be seen to exist; Landlock
# alone (where unshare is refused) lets stat() tell that a pid exists, no more.
pid_ns = mode == "bwrap" or "--pid" in runner._setup_for(req["mode"]).prefix
out = {}
for name, case, hook in req["cases"]:
    case = {k: v.replace("'__PIDNS__'", repr(pid_ns)) if isinstance(v, str) else v for k, v in case.items()}
    r = runner.run_cases([case], lim, mode=req["mode"], audit_hook=hook).results[0]
    out[name] = [r.passed, r.error]
print(json.dumps({"mode": mode, "pid_ns": pid_ns, "results": out}))
"""

# Everything a program in the sandbox can try to learn about the host. CONF
# (set above it) names what to look for; the key is spelled backwards so the
# program's own text never holds it.
COLLECT = r"""
import os, stat

def _read(path):
    try:
        with open(path, 'rb') as fh:
            return fh.read(1 << 20).decode('latin-1')
    except BaseException:
        return None

def _leaks():
    key, marker, me = CONF['key_rev'][::-1], CONF['marker'], str(os.getpid())
    found = []
    if key in repr(dict(os.environ)):
        found.append('os.environ')
    pids = {'self', '1', str(os.getppid()), str(CONF['parent'])}
    try:
        listed = [p for p in os.listdir('/proc') if p.isdigit()]
    except BaseException:
        listed = []
    # Another process is seen when /proc lists it or any of its entries can be
    # read (a PID namespace shows its own init, 1, besides the program itself).
    found += ['listed:' + p for p in listed if p not in (me, '1')]
    pids.update(listed)
    for p in sorted(pids):
        env = _read('/proc/%s/environ' % p)
        if env and key in env:
            found.append('environ:' + p)
        cmd = _read('/proc/%s/cmdline' % p)
        if p not in ('self', me, '1') and any(_read('/proc/%s/%s' % (p, e)) is not None
                                               for e in ('cmdline', 'stat', 'status', 'environ')):
            found.append('process:' + p)
        if CONF['pid_ns'] and p.isdigit() and p not in (me, '1') and os.path.exists('/proc/' + p):
            found.append('exists:' + p)
        if cmd and marker in cmd:
            found.append('cmdline:' + p)
            args = cmd.split('\0')
            if '--input' in args and _read(args[args.index('--input') + 1]) is not None:
                found.append('delivery via cmdline:' + p)
        if p not in ('self', me):
            try:
                fds = os.listdir('/proc/%s/fd' % p)
                found.append('fd list:' + p)
            except BaseException:
                fds = [str(n) for n in range(64)]
            for fd in fds:
                try:
                    w = os.open('/proc/%s/fd/%s' % (p, fd), os.O_WRONLY | os.O_NONBLOCK)
                    os.close(w)
                    found.append('fd open:%s/%s' % (p, fd))
                except BaseException:
                    pass
    for path in CONF['planted']:
        if _read(path) is not None:
            found.append('file:' + path)
    for fd in range(3, 1024):
        try:
            st = os.fstat(fd)
        except BaseException:
            continue
        if not stat.S_ISFIFO(st.st_mode):
            found.append('inherited fd %d' % fd)
    for d in CONF['writable']:
        try:
            with open(os.path.join(d, 'pwned-' + me), 'w') as fh:
                fh.write('x')
            found.append('write:' + d)
        except BaseException:
            pass
    return found
"""

# Turns the audit hook off the way the attempt did: the hook's frame
# is in the traceback of what it refused, and `busy` is a cell of it.
UNHOOK = r"""
def _unhook():
    try:
        open('/etc/hostname')
    except BaseException as e:
        tb = e.__traceback__
        while tb is not None:
            cells = tb.tb_frame.f_locals
            if isinstance(cells.get('busy'), list):
                cells['busy'][0] = True
            tb = tb.tb_next
_unhook()
"""

# Writes a passing verdict into every descriptor of every process it can
# reach, and into its own, then answers wrongly.
FORGE = r"""
import os
VERDICT = b'{"passed": true, "error": null, "calls": 1}\n'
def _forge():
    pids = [str(os.getppid()), str(CONF['parent'])]  # the parent first: its verdict pipe is the prize
    try:
        pids += sorted(p for p in os.listdir('/proc') if p.isdigit() and p not in pids)
    except BaseException:
        pass
    for p in pids:
        for fd in range(0, 256):
            try:
                w = os.open('/proc/%s/fd/%d' % (p, fd), os.O_WRONLY | os.O_NONBLOCK)
            except BaseException:
                continue
            try:
                os.write(w, VERDICT)
            except BaseException:
                pass
    for fd in range(3, 1024):
        try:
            os.write(fd, VERDICT)
        except BaseException:
            pass
_forge()
def f(x):
    return x + 1
"""


def _setpriv_ok() -> bool:
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        return False
    try:
        return (
            subprocess.run(
                ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "true"],
                capture_output=True,
                timeout=10,
            ).returncode
            == 0
        )
    except (OSError, subprocess.SubprocessError):
        return False


@pytest.fixture(scope="module")
def planted():
    """A fake delivery (world-readable, in world-traversable folders) under
    /tmp and /var/tmp, holding the hidden asserts; writable folders too."""
    made, paths, writable = [], [], []
    for base in ("/tmp", "/var/tmp"):
        d = tempfile.mkdtemp(prefix="tasksieve-planted-", dir=base)
        os.chmod(d, 0o777)
        made.append(d)
        p = os.path.join(d, "delivery.jsonl")
        with open(p, "w") as fh:
            fh.write(json.dumps({"task_id": "t1", "tests": f"assert f(0) == {SECRET!r}"}) + "\n")
        os.chmod(p, 0o644)
        paths.append(p)
        writable.append(d)
    # The project checkout is host data too.
    paths.append(os.path.abspath(__file__))
    yield {"delivery": paths[0], "files": paths, "writable": writable}
    for d in made:
        shutil.rmtree(d, ignore_errors=True)


def _conf(planted, parent):
    return {
        "key_rev": KEY[::-1],
        "marker": planted["delivery"],
        "parent": parent,
        "pid_ns": "__PIDNS__",
        "planted": planted["files"],
        "writable": planted["writable"],
    }


def _cases(planted):
    """(name, case, audit_hook) for every attack. In the `passes_if_safe`
    cases the tests assert that nothing leaked; in the others the attempt is
    wrong and only a successful attack passes it."""
    conf = f"CONF = {_conf(planted, '__PARENT__')!r}\n"
    leak_attempt = conf + COLLECT + "def f(x):\n    return _leaks()\n"
    leak_tests = conf + COLLECT + "assert _leaks() == []\nassert f(2) == 4\n"
    cheat = (
        conf
        + COLLECT
        + (
            "def f(x):\n    for p in CONF['planted'][:1]:\n        t = _read(p)\n"
            f"        if t and {SECRET[::-1]!r}[::-1] in t:\n            return {SECRET[::-1]!r}[::-1]\n"
            "    for line in _leaks():\n        if line.startswith('delivery via cmdline'):\n"
            f"            return {SECRET[::-1]!r}[::-1]\n    return None\n"
        )
    )
    cases = []
    for hook, tag in ((True, "with_hook"), (False, "kernel_only")):
        cases += [
            (f"leaks_in_attempt[{tag}]", {"solution": leak_attempt, "tests": "assert f(0) == []"}, hook),
            (f"leaks_in_tests[{tag}]", {"solution": "def f(x):\n    return 2 * x\n", "tests": leak_tests}, hook),
            (f"forged_verdict[{tag}]", {"solution": conf + FORGE, "tests": "assert f(2) == 4"}, hook),
            (f"answers_from_delivery[{tag}]", {"solution": cheat, "tests": f"assert f(0) == {SECRET!r}"}, hook),
        ]
        # /proc/self/environ: empty, or not even readable (a non-dumpable
        # process's /proc entries belong to root). os.environ: empty but for
        # the LC_CTYPE Python itself sets in a C locale (PEP 538) and bwrap's PWD.
        env = (
            "import os\ndef _env():\n"
            "    mine = {k: v for k, v in os.environ.items() if (k, v) not in (('LC_CTYPE', 'C.UTF-8'), ('PWD', '/tmp'))}\n"
            "    try:\n        with open('/proc/self/environ', 'rb') as fh:\n"
            "            return [mine, fh.read()]\n    except PermissionError:\n"
            "        return [mine, b'']\n"
        )
        cases.append(
            (
                f"environment_is_empty[{tag}]",
                {
                    "solution": env + "def f(x):\n    return _env()\n",
                    "tests": env + "assert _env() == [{}, b'']\nassert f(0) == [{}, b'']\n",
                },
                hook,
            )
        )
    # With the hook on, but switched off by the attempt itself first.
    cases += [
        (
            "leaks_in_attempt[unhooked]",
            {"solution": conf + UNHOOK + COLLECT + "def f(x):\n    return _leaks()\n", "tests": "assert f(0) == []"},
            True,
        ),
        ("forged_verdict[unhooked]", {"solution": conf + UNHOOK + FORGE, "tests": "assert f(2) == 4"}, True),
        ("answers_from_delivery[unhooked]", {"solution": UNHOOK + cheat, "tests": f"assert f(0) == {SECRET!r}"}, True),
    ]
    for _, case, _ in cases:
        case.update(entry_point="f", call_check=False)
    return cases


def _run_cell(user: str, mode: str, planted) -> dict:
    if user == "nobody":
        python = shutil.which("python3", path="/usr/bin:/usr/local/bin:/bin")
        prefix = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
    else:
        python, prefix = sys.executable, []
    argv = [*prefix, python, "-c", DRIVER, "--input", planted["delivery"]]
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "PYTHONPATH": ROOT,
        "OPENAI_API_KEY": KEY,
        "TASKSIEVE_TEST_API_KEY": KEY,
        "HOME": "/nonexistent",
    }
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd="/"
    )
    # The parent's pid is only known now: the attempts look at it by number too.
    cases = json.loads(json.dumps(_cases(planted)).replace("__PARENT__", str(proc.pid)))
    out, err = proc.communicate(
        json.dumps({"mode": mode, "delivery": planted["delivery"], "cases": cases}).encode(), timeout=600
    )
    assert proc.returncode == 0, err.decode()[-2000:]
    return json.loads(out.decode().strip().splitlines()[-1])


def _cell_marks(user):
    if user == "root":
        return pytest.mark.skipif(os.geteuid() != 0, reason="the root cells need root")
    return pytest.mark.skipif(not _setpriv_ok(), reason="running tasksieve as nobody needs root and setpriv")


CELLS = [
    pytest.param((user, mode), id=f"{user}-{mode}", marks=_cell_marks(user))
    for user in ("root", "nobody")
    for mode in ("bwrap", "rlimit")
]
_OUTCOMES: dict = {}


@pytest.fixture
def cell(request, planted):
    user, mode = request.param
    if (user, mode) not in _OUTCOMES:
        _OUTCOMES[user, mode] = _run_cell(user, mode, planted)
    return _OUTCOMES[user, mode]


ATTACKS = [
    "leaks_in_attempt[with_hook]",
    "leaks_in_attempt[kernel_only]",
    "leaks_in_attempt[unhooked]",
    "leaks_in_tests[with_hook]",
    "leaks_in_tests[kernel_only]",
    "environment_is_empty[with_hook]",
    "environment_is_empty[kernel_only]",
]
CHEATS = [
    "forged_verdict[with_hook]",
    "forged_verdict[kernel_only]",
    "forged_verdict[unhooked]",
    "answers_from_delivery[with_hook]",
    "answers_from_delivery[kernel_only]",
    "answers_from_delivery[unhooked]",
]


@pytest.mark.parametrize("cell", CELLS, indirect=True)
@pytest.mark.parametrize("attack", ATTACKS)
def test_nothing_of_the_host_is_visible(cell, attack):
    """No key (os.environ, /proc/self|ppid|*/environ), no other process, no
    descriptor of another process, no inherited descriptor, no planted file,
    no write outside: the cell refuses the mode or the program sees nothing."""
    if "refused" in cell:
        return
    passed, error = cell["results"][attack]
    assert passed, f"{attack} in {cell['mode']}: {error}"


@pytest.mark.parametrize("cell", CELLS, indirect=True)
@pytest.mark.parametrize("attack", CHEATS)
def test_a_wrong_attempt_cannot_pass(cell, attack):
    """A forged verdict in every reachable descriptor, or the hidden answer
    read from the delivery: the wrong attempt still fails, on the tests."""
    if "refused" in cell:
        return
    passed, error = cell["results"][attack]
    assert not passed, f"{attack} passed in {cell['mode']}"
    # The verdict is the harness's (a wrong answer, or garbage the attempt
    # wrote on its own answer pipe): a forged line never reached the parent.
    assert error is not None and not error.startswith("harness_error"), error


@pytest.mark.parametrize("cell", CELLS, indirect=True)
def test_a_refused_cell_drops_code_tasks(cell):
    """Refusing is the only alternative to holding: then the reason says so."""
    if "refused" in cell:
        assert cell["refused"]
    else:
        assert cell["mode"] in ("bwrap", "rlimit")


# --- where the fallback cannot hold, nothing falls back to it -----------------------------------


@pytest.mark.skipif(os.geteuid() != 0, reason="drops to nobody: needs root")
def test_landlock_alone_holds_where_unshare_is_refused(monkeypatch, planted):
    """A container that refuses unshare: the fallback has no namespace at
    all (it sees the host's /proc), and Landlock alone must still keep
    every entry of another process, the parent's descriptors and every
    planted file out, with the audit hook off and switched off."""
    monkeypatch.setattr(sandbox, "_unshare_prefix", lambda: [])
    monkeypatch.setattr(sandbox, "_CACHE", {})
    assert sandbox.resolve_mode("rlimit") == "rlimit"
    assert "no PID namespace" in sandbox.describe("rlimit")
    lim = sandbox.Limits(cpu_seconds=3, wall_seconds=6, memory_mb=256)
    cases = [c for c in _cases(planted) if not c[0].startswith("answers_from")]
    for name, case, hook in cases:
        for k in ("solution", "tests"):
            case[k] = case[k].replace("'__PARENT__'", str(os.getpid())).replace("'__PIDNS__'", "False")
        res = sandbox.run_cases([case], lim, mode="rlimit", audit_hook=hook).results[0]
        if name.startswith("forged"):
            assert not res.passed and not res.error.startswith("harness_error"), (name, res)
        else:
            assert res.passed, (name, res)
