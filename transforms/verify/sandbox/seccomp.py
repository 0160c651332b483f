"""The kernel filter every sandboxed process loads (layer 3 of guard.py),
and the C-library handles it and Landlock (guard.install_landlock) call
through. Standard library only: run inside the sandbox as module
`sandbox_seccomp` (see runner.py), like guard.py.

`install_seccomp`: a kernel filter (x86_64) that makes socket creation,
process creation, exec, signals to other processes, ptrace, mounts,
namespaces, bpf, keyrings, io_uring, System V IPC, POSIX message queues and
module loading fail with EPERM. It is inherited and cannot be removed, so
native code (ctypes) cannot get around it. ctypes is forgotten once the
filter is on (`forget_ctypes`): attempt code must not find it loaded.
"""

import os
import struct
import sys

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
