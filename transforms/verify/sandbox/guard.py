"""What both sandboxed processes do to themselves before untrusted code runs,
and the plain-data codec they talk in. Standard library only: this text is
run inside the sandbox as module `sandbox_guard` (see runner.py), by an
interpreter started with `-I -S -B`, so nothing of tasksieve is importable
there.

Layers, strongest first (README, "The code sandbox", says which guarantees
what):
1. `drop_privileges`: from root to the sandbox uid before anything else;
   refuses to go on as uid 0 or with any capability left.
2. `confine` (Landlock, kernel 5.13+, no privilege needed): the process
   may open only the interpreter's and the system's library folders, its
   work dir, its own /proc entry and a few devices; no other process's
   /proc entry, descriptors, environment or memory (Landlock's ptrace
   rule). Required under the rlimit fallback, tried under bwrap.
   `leave_init` first, in a PID namespace of the fallback's own.
3. `install_seccomp`: a kernel filter (x86_64) that makes socket creation,
   process creation, exec, signals to other processes, ptrace, mounts,
   namespaces, bpf, keyrings, io_uring and module loading fail with EPERM.
   It is inherited and cannot be removed, so native code (ctypes) cannot
   get around it.
4. rlimits: CPU seconds, address space, file size (output), open files,
   no new processes (RLIMIT_NPROC = 0), no core dumps; non-dumpable, so a
   process of the same uid cannot read this one's memory or descriptors.
5. `install_audit_hook`: a Python-level check (network, processes, ctypes,
   writes outside the work dir, reads outside the work dir and the
   interpreter's own files). Defence in depth only: Python code in the same
   process can get around a Python-level hook, so nothing relies on it.

The codec (`encode` / `decode`) is the only way values cross between the
attempt's process and the test harness: None, bool, int, float, str, bytes
and lists, tuples, dicts, sets and frozensets of those, tagged by exact type.
The harness rebuilds fresh built-in objects from it, so an attempt's custom
`__eq__`, an `int` subclass or a patched builtin has nothing to act on.
"""

import base64
import json
import os
import re
import resource
import stat
import struct
import sys

MAX_DEPTH = 100
MAX_NODES = 1_000_000


class NotPlainData(Exception):
    """A value that is not plain data crossed (or tried to cross) the boundary."""


# --- the plain-data codec ------------------------------------------------------------------


def encode(value):
    """A JSON-able tagged tree of `value`; NotPlainData for anything that is
    not exactly one of the plain types (subclasses included: `type(x) is int`)."""
    budget = [MAX_NODES]

    def enc(x, depth):
        budget[0] -= 1
        if depth > MAX_DEPTH or budget[0] < 0:
            raise NotPlainData("too deep or too large")
        t = type(x)
        if x is None:
            return ["n"]
        if t is bool:
            return ["b", 1 if x else 0]
        if t is int:
            return ["i", hex(x)]
        if t is float:
            return ["f", x.hex()]
        if t is str:
            return ["s", x]
        if t is bytes:
            return ["y", base64.b64encode(x).decode("ascii")]
        if t is list or t is tuple:
            return ["l" if t is list else "t", [enc(v, depth + 1) for v in x]]
        if t is dict:
            return ["d", [[enc(k, depth + 1), enc(v, depth + 1)] for k, v in x.items()]]
        if t is set or t is frozenset:
            return ["S" if t is set else "F", [enc(v, depth + 1) for v in x]]
        raise NotPlainData(safe_name(t.__name__))

    return enc(value, 0)


_INT = re.compile(r"-?0x[0-9a-f]+\Z")
_SEQ = {"l": list, "t": tuple, "S": set, "F": frozenset}


def decode(tree):
    """Fresh built-in objects from a tagged tree; NotPlainData for anything
    malformed. Never runs code from the tree."""
    budget = [MAX_NODES]

    def dec(node, depth):
        budget[0] -= 1
        if depth > MAX_DEPTH or budget[0] < 0:
            raise NotPlainData("too deep or too large")
        if type(node) is not list or not node or type(node[0]) is not str:
            raise NotPlainData("malformed")
        tag, rest = node[0], node[1:]
        if tag == "n" and not rest:
            return None
        if len(rest) != 1:
            raise NotPlainData("malformed")
        v = rest[0]
        if tag == "b" and v in (0, 1) and type(v) is int:
            return v == 1
        if tag == "i" and type(v) is str and len(v) < 100_000 and _INT.match(v):
            return int(v, 16)
        if tag == "f" and type(v) is str and len(v) < 64:
            try:
                return float.fromhex(v)
            except ValueError:
                raise NotPlainData("malformed float") from None
        if tag == "s" and type(v) is str:
            return str(v)
        if tag == "y" and type(v) is str:
            try:
                return base64.b64decode(v.encode("ascii"), validate=True)
            except (ValueError, UnicodeEncodeError):
                raise NotPlainData("malformed bytes") from None
        if tag in _SEQ and type(v) is list:
            items = [dec(x, depth + 1) for x in v]
            try:
                return _SEQ[tag](items)
            except TypeError:  # an unhashable member of a set
                raise NotPlainData("unhashable set member") from None
        if tag == "d" and type(v) is list:
            out = {}
            for pair in v:
                if type(pair) is not list or len(pair) != 2:
                    raise NotPlainData("malformed")
                k = dec(pair[0], depth + 1)
                try:
                    out[k] = dec(pair[1], depth + 1)
                except TypeError:
                    raise NotPlainData("unhashable dict key") from None
            return out
        raise NotPlainData("malformed")

    return dec(tree, 0)


def safe_name(name, limit=40):
    """A type or exception name reduced to identifier characters: the only
    attempt-chosen text that ever reaches a verdict."""
    cleaned = re.sub(r"[^A-Za-z0-9_.]", "", str(name))[:limit]
    return cleaned or "unnamed"


def send(fd, obj):
    data = (json.dumps(obj, separators=(",", ":")) + "\n").encode("utf-8", "surrogatepass")
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


class LineReader:
    """Reads newline-terminated JSON messages from a pipe, at most `cap`
    bytes each."""

    def __init__(self, fd, cap):
        self.fd, self.cap, self.buf = fd, cap, b""

    def read(self):
        """The next message, or None at end of file. NotPlainData for an
        oversized or malformed one."""
        while b"\n" not in self.buf:
            if len(self.buf) > self.cap:
                raise NotPlainData("message too large")
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                return None
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        try:
            return json.loads(line.decode("utf-8", "surrogatepass"))
        except (ValueError, RecursionError):
            raise NotPlainData("malformed message") from None


# --- privileges, kernel filter, limits -----------------------------------------------------


def drop_privileges(ids, allow_root=False):
    """Become (uid, gid) when started as root; then insist on not being root
    and on holding no capability (unless the user named the unsafe mode)."""
    if ids and os.getuid() == 0:
        os.setgroups([])
        os.setgid(ids[1])
        os.setuid(ids[0])
    if allow_root:
        return
    if os.getuid() == 0 or os.geteuid() == 0:
        raise SystemExit("sandbox: refusing to run untrusted code as uid 0")
    try:
        with open("/proc/self/status") as fh:
            caps = {k: v.strip() for k, _, v in (ln.partition(":") for ln in fh)}
        if int(caps.get("CapEff", "0"), 16) or int(caps.get("CapPrm", "0"), 16):
            raise SystemExit("sandbox: refusing to run untrusted code with capabilities")
    except OSError:
        pass


# x86_64 system call numbers refused by the filter (EPERM). Threads need
# clone too, and RLIMIT_NPROC = 0 refuses them anyway.
_DENY_X86_64 = {
    "socket": 41,
    "connect": 42,
    "accept": 43,
    "bind": 49,
    "listen": 50,
    "accept4": 288,
    "clone": 56,
    "fork": 57,
    "vfork": 58,
    "execve": 59,
    "execveat": 322,
    "clone3": 435,
    "kill": 62,
    "tkill": 200,
    "tgkill": 234,
    "rt_sigqueueinfo": 129,
    "rt_tgsigqueueinfo": 297,
    "pidfd_open": 434,
    "pidfd_send_signal": 424,
    "pidfd_getfd": 438,
    "ptrace": 101,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "kcmp": 312,
    "mount": 165,
    "umount2": 166,
    "pivot_root": 155,
    "chroot": 161,
    "unshare": 272,
    "setns": 308,
    "fsopen": 430,
    "fsmount": 432,
    "move_mount": 429,
    "open_tree": 428,
    "bpf": 321,
    "perf_event_open": 298,
    "userfaultfd": 323,
    "keyctl": 250,
    "add_key": 248,
    "request_key": 249,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "init_module": 175,
    "finit_module": 313,
    "delete_module": 176,
    "kexec_load": 246,
    "kexec_file_load": 320,
    "reboot": 169,
    "swapon": 167,
    "swapoff": 168,
    "acct": 163,
    "name_to_handle_at": 303,
    "open_by_handle_at": 304,
    "iopl": 172,
    "ioperm": 173,
    "personality": 135,
    "syslog": 103,
    "setuid": 105,
    "setgid": 106,
    "setreuid": 113,
    "setregid": 114,
    "setresuid": 117,
    "setresgid": 119,
    "setgroups": 116,
    "capset": 126,
    # System V IPC and POSIX message queues outlive a process in its IPC namespace: a pooled
    # sandbox's next case would find them (docs/verification.md, "Pooled sandboxes").
    "shmget": 29,
    "shmat": 30,
    "shmctl": 31,
    "semget": 64,
    "semop": 65,
    "semctl": 66,
    "shmdt": 67,
    "msgget": 68,
    "msgsnd": 69,
    "msgrcv": 70,
    "msgctl": 71,
    "semtimedop": 220,
    "mq_open": 240,
    "mq_unlink": 241,
    "mq_timedsend": 242,
    "mq_timedreceive": 243,
    "mq_notify": 244,
    "mq_getsetattr": 245,
}
_AUDIT_ARCH_X86_64 = 0xC000003E


def seccomp_program(deny=_DENY_X86_64):
    """A classic-BPF seccomp program: wrong architecture or x32 ABI -> kill;
    a denied call -> EPERM; anything else allowed."""
    ld_abs, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    kill, allow, eperm = 0x80000000, 0x7FFF0000, 0x00050000 | 1
    nrs = sorted(set(deny.values()))
    prog = [
        (ld_abs, 0, 0, 4),
        (jeq, 1, 0, _AUDIT_ARCH_X86_64),
        (ret, 0, 0, kill),
        (ld_abs, 0, 0, 0),
        (jge, len(nrs) + 1, 0, 0x40000000),
    ]
    for i, nr in enumerate(nrs):
        prog.append((jeq, len(nrs) - i, 0, nr))  # jump over the rest and ALLOW, to EPERM
    prog += [(ret, 0, 0, allow), (ret, 0, 0, eperm)]
    return b"".join(struct.pack("HBBI", *ins) for ins in prog), len(prog)


_NATIVE = {}  # ctypes, libc and the structures the layers below use; emptied by forget_ctypes


def native():
    """ctypes, the C library and the structures of the seccomp and landlock
    calls, built once per process (a pooled worker builds them before it
    forks, so each case's child does not pay for them again)."""
    if not _NATIVE:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]

        class Fprog(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

        class Ruleset(ctypes.Structure):
            _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]

        class Beneath(ctypes.Structure):
            _pack_ = 1
            _fields_ = [("allowed", ctypes.c_uint64), ("fd", ctypes.c_int32)]

        _NATIVE.update(
            ctypes=ctypes, libc=libc, Fprog=Fprog, Ruleset=Ruleset, Beneath=Beneath, seccomp=seccomp_program()
        )
    return _NATIVE


def install_seccomp():
    """Load the filter (and no_new_privs, and non-dumpable). Returns a short
    word for the record: 'on' or why it is off."""
    if os.uname().machine != "x86_64":
        return "off (no filter for " + os.uname().machine + ")"
    try:
        nat = native()
    except ImportError:
        return "off (no ctypes)"
    try:
        ctypes, libc = nat["ctypes"], nat["libc"]
        code, n = nat["seccomp"]
        buf = ctypes.create_string_buffer(code)
        prog = nat["Fprog"](n, ctypes.cast(buf, ctypes.c_void_p))
        if libc.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE 0
            return "off (prctl dumpable failed)"
        if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
            return "off (no_new_privs failed)"
        if libc.prctl(22, 2, ctypes.addressof(prog), 0, 0) != 0:  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
            return f"off (errno {ctypes.get_errno()})"
        return "on"
    finally:
        forget_ctypes()


def forget_ctypes():
    """Attempt code must not find a loaded ctypes (the audit hook refuses a
    new import). Called once the last layer that needs it is on: importing
    it again costs milliseconds."""
    _NATIVE.clear()
    for name in ("ctypes", "_ctypes", "ctypes._endian"):
        sys.modules.pop(name, None)


def set_limits(cpu_seconds, memory_bytes, file_bytes):
    def lower(which, value):
        hard = resource.getrlimit(which)[1]
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(which, (value, value))

    # CPU: the soft limit sends SIGXCPU (fatal), the hard one SIGKILL a second later.
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    lower(resource.RLIMIT_AS, memory_bytes)
    lower(resource.RLIMIT_FSIZE, file_bytes)
    lower(resource.RLIMIT_NOFILE, 64)
    lower(resource.RLIMIT_CORE, 0)
    lower(resource.RLIMIT_NPROC, 0)


# --- landlock: what the process may open, held by the kernel -----------------------------

# Access rights per Landlock ABI (linux/landlock.h): ABI 1 has bits 0-12 (execute,
# write, read, read_dir, remove and make of every kind); 2 adds REFER (13); 3 TRUNCATE
# (14); 5 IOCTL_DEV (15). 4 adds TCP bind/connect, 6 scopes abstract unix sockets and
# signals to the process's own domain.
_LL_FS = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1, 5: (1 << 16) - 1}
_LL_READ = 1 | 4 | 8  # EXECUTE, READ_FILE, READ_DIR
_LL_FILE_ONLY = 1 | 2 | 4 | (1 << 14) | (1 << 15)  # what a rule on a file (not a folder) may hold
_SYS_CREATE, _SYS_ADD, _SYS_RESTRICT = 444, 445, 446  # the same numbers on every architecture


def install_landlock(read_only, read_write, files):
    """Allow opening only under the folders `read_only` (read, list, run),
    `read_write` (anything) and the single `files` (read, write): every
    other path of the host, /proc of any other process included, is
    refused by the kernel, whatever Python code does afterwards. The
    domain also denies ptrace-type access (/proc/<pid>/fd, environ, mem) to
    every process outside it, and from ABI 4/6 on, TCP and signals out of
    it. Returns 'on (abi N)' or why it is off."""
    try:
        nat = native()
    except ImportError:
        return "off (no ctypes)"
    try:
        ctypes, libc, Ruleset, Beneath = nat["ctypes"], nat["libc"], nat["Ruleset"], nat["Beneath"]
        abi = libc.syscall(_SYS_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
        if abi < 1:
            return f"off (landlock unavailable: errno {ctypes.get_errno()})"
        fs = _LL_FS[min(int(abi), 5)]
        attr = Ruleset(fs, 3 if abi >= 4 else 0, 3 if abi >= 6 else 0)
        size = 8 if abi < 4 else (16 if abi < 6 else 24)
        ruleset = libc.syscall(_SYS_CREATE, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
        if ruleset < 0:
            return f"off (landlock ruleset: errno {ctypes.get_errno()})"
        try:
            rules = (
                [(p, _LL_READ) for p in read_only]
                + [(p, fs) for p in read_write]
                + [(p, 2 | 4 | (1 << 14) | (1 << 15)) for p in files]
            )
            for path, access in rules:
                try:
                    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
                except OSError:
                    continue  # not on this machine: nothing to allow
                try:
                    if not stat.S_ISDIR(os.fstat(fd).st_mode):
                        access &= _LL_FILE_ONLY
                    rule = Beneath(access & fs, fd)
                    if (
                        libc.syscall(
                            _SYS_ADD, ctypes.c_int(ruleset), ctypes.c_int(1), ctypes.byref(rule), ctypes.c_uint32(0)
                        )
                        != 0
                    ):
                        return f"off (landlock rule for {path}: errno {ctypes.get_errno()})"
                finally:
                    os.close(fd)
            if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS, which landlock needs
                return "off (no_new_privs failed)"
            if libc.syscall(_SYS_RESTRICT, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
                return f"off (landlock restrict: errno {ctypes.get_errno()})"
        finally:
            os.close(ruleset)
        return f"on (abi {abi})"
    except BaseException:
        forget_ctypes()
        raise


_ROOTS = []


def confine_roots():
    """The folders `confine` lets the process read: the interpreter's and the system's."""
    if not _ROOTS:
        lib = [
            os.path.realpath(p)
            for p in (
                sys.prefix,
                sys.base_prefix,
                sys.exec_prefix,
                os.path.dirname(os.__file__),
                os.path.dirname(sys.executable),
            )
        ]
        system = ["/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin"]
        _ROOTS.extend(p for p in dict.fromkeys(lib + system) if p != "/")  # "/" would allow everything
    return list(_ROOTS)


def confine(workdir):
    """install_landlock for a sandboxed process: the interpreter's files and
    the system's libraries to read, its work dir to use, its own /proc
    entry, a few devices. Nothing else of the host, and no other process's
    /proc entry (not even bwrap's init: /proc/1/fd of a non-root bwrap)."""
    return install_landlock(
        confine_roots() + [f"/proc/{os.getpid()}"], [workdir], ["/dev/null", "/dev/zero", "/dev/urandom", "/dev/random"]
    )


# --- the audit hook (defence in depth) --------------------------------------------------------

NET = {
    "socket.__new__",
    "socket.connect",
    "socket.bind",
    "socket.sendto",
    "socket.sendmsg",
    "socket.getaddrinfo",
    "socket.gethostbyname",
    "socket.gethostbyaddr",
    "socket.getnameinfo",
}
PROC = {
    "os.fork",
    "os.forkpty",
    "os.posix_spawn",
    "os.exec",
    "os.spawn",
    "os.system",
    "subprocess.Popen",
    "os.kill",
    "os.killpg",
    "os.startfile",
    "pty.spawn",
}
FS_WRITE = {
    "os.remove",
    "os.rmdir",
    "os.mkdir",
    "os.rename",
    "os.chmod",
    "os.chown",
    "os.link",
    "os.symlink",
    "os.truncate",
    "os.utime",
    "os.mkfifo",
    "os.mknod",
    "shutil.rmtree",
    "shutil.copyfile",
    "shutil.move",
}
NATIVE = {
    "ctypes",
    "_ctypes",
    "_posixsubprocess",
    "multiprocessing",
    "_multiprocessing",
    "_xxsubinterpreters",
    "_testcapi",
    "_testinternalcapi",
    "cffi",
    "_cffi_backend",
    "gc",
}
WHY = ("network", "process", "native", "write", "read")


class SandboxViolation(PermissionError):
    def __init__(self, why):
        super().__init__(f"sandbox: {why} blocked")
        self.why = why


def install_audit_hook(workdir, readable):
    """Refuse, by raising SandboxViolation, what the kernel layers refuse
    anyway, so the attempt gets a clear error rather than an odd one. All
    state lives in this closure, not in a module an attempt can import."""
    work = os.path.realpath(workdir)
    roots = tuple(os.path.realpath(p) for p in (work, *readable))
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
    busy = [False]
    realpath, join, fsdecode, sep = os.path.realpath, os.path.join, os.fsdecode, os.sep

    def under(path, allowed):
        if isinstance(path, int):
            return True  # an already open descriptor
        p = realpath(join(work, fsdecode(path)))
        return any(p == r or p.startswith(r + sep) for r in allowed)

    def hook(event, args):
        if busy[0]:
            return
        busy[0] = True
        try:
            if event in NET:
                raise SandboxViolation("network")
            if event in PROC:
                raise SandboxViolation("process")
            if event.startswith("ctypes."):
                raise SandboxViolation("native")
            if event == "import" and str(args[0]).split(".")[0] in NATIVE:
                raise SandboxViolation("native")
            if event == "open":
                path, mode, flags = args
                writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool((flags or 0) & write_flags)
                if writing and not under(path, (work,)):
                    raise SandboxViolation("write")
                if not writing and not under(path, roots):
                    raise SandboxViolation("read")
            elif event in FS_WRITE:
                for a in args:
                    if isinstance(a, (str, bytes, os.PathLike)) and not under(a, (work,)):
                        raise SandboxViolation("write")
        finally:
            busy[0] = False

    sys.addaudithook(hook)


def leave_init():
    """In a PID namespace of its own (the fallback's `unshare --pid`), this
    process is the namespace's init, which the kernel spares every signal it
    has no handler for: SIGXCPU, the CPU limit, would do nothing. So init
    forks once: the child goes on; init closes every descriptor (the pipes
    then end with the child) and exits with the child's status, a signal
    as 128 + its number, as bwrap reports it."""
    if os.getpid() != 1:
        return
    child = os.fork()
    if child == 0:
        return
    os.closerange(0, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except InterruptedError:
            continue
        except ChildProcessError:
            os._exit(1)
    code = os.waitstatus_to_exitcode(status)
    os._exit(128 - code if code < 0 else code)


LOCK_KEYS = ("workdir", "drop", "allow_root", "audit_hook", "confine", "limits")
_LOCKED = []  # [settings, seccomp word] once this process is locked down


def lock_down(req):
    """Everything above, in order, from the request's settings. Returns the
    seccomp state word. A pooled worker's spare child is locked down before
    its case arrives; the case's own call then finds it done with the same
    settings (any other settings: it refuses to go on)."""
    settings = {k: req.get(k) for k in LOCK_KEYS}
    if _LOCKED:
        if _LOCKED[0] != settings:
            raise SystemExit("sandbox: refusing to run a case locked down with other settings")
        return _LOCKED[1]
    seccomp = _lock_down(req)
    _LOCKED[:] = [settings, seccomp]
    return seccomp


def _lock_down(req):
    leave_init()
    os.chdir(req["workdir"])
    drop_privileges(req.get("drop"), req.get("allow_root", False))
    lim = req["limits"]
    if req.get("confine", "off") != "off":
        state = confine(req["workdir"])
        if not state.startswith("on") and req["confine"] == "require":
            raise SystemExit(f"sandbox: refusing to run untrusted code unconfined: landlock {state}")
    seccomp = install_seccomp()
    set_limits(lim["cpu"], lim["memory"], lim["output"])
    if req.get("audit_hook", True):
        readable = [
            sys.prefix,
            sys.base_prefix,
            sys.exec_prefix,
            "/dev/null",
            "/dev/urandom",
            "/proc/self",
            f"/proc/{os.getpid()}",
            os.path.dirname(os.__file__),
        ]
        install_audit_hook(req["workdir"], readable)
    return seccomp
