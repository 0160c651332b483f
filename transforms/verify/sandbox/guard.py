"""What both sandboxed processes do to themselves before untrusted code runs.
Standard library only: this text is run inside the sandbox as module
`sandbox_guard` (see runner.py), by an interpreter started with `-I -S -B`,
so nothing of tasksieve is importable there; beside it run `sandbox_seccomp`
(seccomp.py: the kernel filter and the C-library handles) and
`sandbox_codec` (codec.py: the plain data the two processes talk in).

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
3. `install_seccomp` (seccomp.py): a kernel filter (x86_64) that makes
   socket creation, process creation, exec, signals to other processes,
   ptrace, mounts, namespaces, bpf, keyrings, io_uring, System V IPC and
   module loading fail with EPERM. It is inherited and cannot be removed,
   so native code (ctypes) cannot get around it.
4. rlimits: CPU seconds, address space, file size (output), open files,
   no new processes (RLIMIT_NPROC = 0), no core dumps; non-dumpable, so a
   process of the same uid cannot read this one's memory or descriptors.
5. `install_audit_hook`: a Python-level check (network, processes, ctypes,
   writes outside the work dir, reads outside the work dir and the
   interpreter's own files). Defence in depth only: Python code in the same
   process can get around a Python-level hook, so nothing relies on it.
"""

import os
import resource
import stat
import sys

from sandbox_seccomp import forget_ctypes, install_seccomp, native


# --- privileges and limits ---------------------------------------------------------------------


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
    if not seccomp.startswith("on"):
        # No silent weaker sandbox: the filter is what refuses sockets, System V IPC (which outlives a
        # pooled case), signals and exec; without it the start-up probe fails and code tasks are dropped.
        raise SystemExit(f"sandbox: refusing to run untrusted code without the seccomp filter: {seccomp}")
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
