"""The program that runs inside the sandbox (see sandbox.py), as
`python -I -S -B -c <this file's text>`: stdlib only, no tasksieve import,
so the sandboxed interpreter needs nothing but its own standard library.

It reads one JSON request from stdin, lowers its own limits, installs an
audit hook that refuses network, process creation, native-code loading,
writes outside its working directory and reads of other processes' /proc
entries, then runs each case (attempt + tests) in a fresh namespace and
writes one line per case to the result descriptor: `<nonce> <json>`. The
nonce is the parent's proof that a line came from here and not from an
attempt that printed a fake verdict or called `os._exit(0)` early.
"""

import builtins
import json
import os
import resource
import signal
import sys
import traceback

_req = json.loads(sys.stdin.read())
sys.stdin.close()
LIM = _req["limits"]
os.chdir(_req["workdir"])
if _req.get("drop"):
    # Started as root (bwrap's privileged mode, or the fallback): become
    # nobody before anything untrusted runs. Capabilities go with it.
    os.setgroups([])
    os.setgid(_req["drop"][1])
    os.setuid(_req["drop"][0])
WORK = os.path.realpath(os.getcwd())
MY_PID = str(os.getpid())


def _limit(which, value):
    hard = resource.getrlimit(which)[1]
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)  # a hard limit can only be lowered
    resource.setrlimit(which, (value, value))


# CPU: soft limit sends SIGXCPU (fatal), the hard one a second later SIGKILL.
resource.setrlimit(resource.RLIMIT_CPU, (LIM["cpu"], LIM["cpu"] + 1))
_limit(resource.RLIMIT_AS, LIM["memory"])
_limit(resource.RLIMIT_FSIZE, LIM["output"])  # stdout/stderr files and any file written
_limit(resource.RLIMIT_NOFILE, 64)
_limit(resource.RLIMIT_CORE, 0)
# No new processes or threads for this user (root ignores it: the parent
# never runs the sandbox as root when it can drop to nobody).
_limit(resource.RLIMIT_NPROC, 0)

NET = {"socket.__new__", "socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg", "socket.getaddrinfo",
       "socket.gethostbyname", "socket.gethostbyaddr", "socket.getnameinfo"}
PROC = {"os.fork", "os.forkpty", "os.posix_spawn", "os.exec", "os.spawn", "os.system", "subprocess.Popen",
        "os.kill", "os.killpg", "os.startfile", "pty.spawn"}
FS_WRITE = {"os.remove", "os.rmdir", "os.mkdir", "os.rename", "os.chmod", "os.chown", "os.link", "os.symlink",
            "os.truncate", "os.utime", "os.mkfifo", "os.mknod", "shutil.rmtree", "shutil.copyfile", "shutil.move"}
NATIVE = {"ctypes", "_ctypes", "_posixsubprocess", "multiprocessing", "_multiprocessing", "_xxsubinterpreters",
          "_testcapi", "_testinternalcapi", "cffi", "_cffi_backend"}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
state = {"violation": None, "busy": False}


class SandboxViolation(PermissionError):
    pass


def _deny(what):
    if state["violation"] is None:
        state["violation"] = what
    raise SandboxViolation(f"sandbox: {what}")


def _inside(path):
    if isinstance(path, int):
        return True  # an already open descriptor: 0-2 and the result pipe
    p = os.fsdecode(path)
    p = os.path.realpath(os.path.join(WORK, p))
    return p == WORK or p.startswith(WORK + os.sep)


def _proc_of_other(path):
    if isinstance(path, int):
        return False
    parts = os.path.realpath(os.path.join(WORK, os.fsdecode(path))).split(os.sep)
    return len(parts) > 2 and parts[1] == "proc" and (parts[2] not in (MY_PID, "self", "thread-self")
                                                      and (parts[2].isdigit() or parts[2] == "environ"))


def _hook(event, args):
    if state["busy"]:
        return
    state["busy"] = True
    try:
        if event in NET:
            _deny("network blocked")
        elif event in PROC:
            _deny("process creation blocked")
        elif event.startswith("ctypes."):
            _deny("native code (ctypes) blocked")
        elif event == "import" and str(args[0]).split(".")[0] in NATIVE:
            _deny(f"import of {args[0]} blocked")
        elif event == "open":
            path, mode, flags = args
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool((flags or 0) & _WRITE_FLAGS)
            if writing and not _inside(path):
                _deny("write outside the sandbox directory blocked")
            if _proc_of_other(path):
                _deny("reading another process's /proc entry blocked (environment)")
        elif event in FS_WRITE:
            for a in args:
                if isinstance(a, (str, bytes, os.PathLike)) and not _inside(a):
                    _deny("write outside the sandbox directory blocked")
    finally:
        state["busy"] = False


class CaseTimeout(BaseException):
    """Raised by the per-case timer; a BaseException so `except Exception`
    in an attempt does not swallow it."""


def _on_alarm(signum, frame):
    raise CaseTimeout()


def _where(tb, sources):
    """'tests line 3: assert f(1) == 2' for the innermost frame in the
    tests (or the attempt)."""
    found = None
    for frame, lineno in traceback.walk_tb(tb):
        name = frame.f_code.co_filename
        if name in sources:
            found = (name, lineno)
    if not found:
        return ""
    name, lineno = found
    lines = sources[name].splitlines()
    text = lines[lineno - 1].strip()[:160] if 0 < lineno <= len(lines) else ""
    return f" ({name.strip('<>')} line {lineno}: {text})"


def _describe(e, sources):
    where = _where(e.__traceback__, sources)
    if isinstance(e, CaseTimeout):
        return "timeout"
    if isinstance(e, MemoryError):
        return f"memory (over {LIM['memory'] // 2**20} MB)"
    if isinstance(e, AssertionError):
        msg = str(e).strip()
        return f"assertion failed{where}" + (f": {msg[:200]}" if msg else "")
    if isinstance(e, SystemExit):
        return f"exited before the tests finished (SystemExit {e.code!r}){where}"
    if isinstance(e, SyntaxError):
        return f"syntax error in {str(e.filename).strip('<>')}: {e.msg} (line {e.lineno})"
    if isinstance(e, OSError) and e.errno == 27:  # EFBIG: RLIMIT_FSIZE reached
        return "output too large"
    return f"{type(e).__name__}: {str(e)[:200]}{where}"


def run_case(case):
    sources = {"<attempt>": case["solution"], "<tests>": case["tests"]}
    ns = {"__name__": "solution", "__builtins__": builtins}
    state["violation"] = None
    error = None
    signal.setitimer(signal.ITIMER_REAL, LIM["case_wall"])
    try:
        exec(compile(case["solution"], "<attempt>", "exec"), ns)
        entry = case["entry_point"]
        if entry and not callable(ns.get(entry)):
            error = f"the attempt does not define {entry}()"
        else:
            exec(compile(case["tests"], "<tests>", "exec"), ns)
            if case["call_check"]:
                ns["check"](ns[entry])
            sys.stdout.flush()
    except BaseException as e:  # noqa: B036 - everything an attempt can raise is a verdict
        error = _describe(e, sources)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    if state["violation"]:
        error = state["violation"]
    return {"passed": error is None, "error": error}


def main(req):
    # The nonce and the result descriptor live in this frame only, not in
    # module globals an attempt could read through `import __main__`.
    nonce, fd, cases, hook = req["nonce"], req["fd"], req["cases"], req.get("audit_hook", True)
    req.clear()
    signal.signal(signal.SIGALRM, _on_alarm)
    if hook:  # off only in the tests that prove the kernel-enforced limits on their own
        sys.addaudithook(_hook)
    for c in cases:
        result = run_case(c)
        try:
            os.write(fd, (nonce + " " + json.dumps(result) + "\n").encode())
        except OSError:
            break


main(_req)
