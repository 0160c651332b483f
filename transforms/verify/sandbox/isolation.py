"""The start-up check that a sandbox mode keeps the host out, tried rather
than assumed (issue 48).

Before a mode without a mount namespace (the rlimit fallback) is used, one
case runs under it with the audit hook OFF, so only the kernel's layers
count. Both the attempt and the tests try what a hostile program would: list
/proc, read this process's environ and command line, open its descriptors,
read a world-readable file planted in a world-traversable folder of the
host's temp dir, and write there. If anything succeeds the mode is not
used: `auto` then has no safe sandbox, and code tasks are dropped with
`no_safe_sandbox`.
"""

from __future__ import annotations

import os
import shutil
import tempfile

_CHECKS = r"""
import os

def _leaks():
    found, me = [], str(os.getpid())
    try:
        seen = [p for p in os.listdir('/proc') if p.isdigit() and p not in (me, '1')]
        if seen:
            found.append('other processes in /proc')
    except OSError:
        pass
    if PID_NS and os.path.exists('/proc/%d' % PARENT):
        found.append('the parent in /proc')
    for what in ('environ', 'cmdline'):
        try:
            with open('/proc/%d/%s' % (PARENT, what), 'rb') as fh:
                fh.read(1)
            found.append('the parent\'s ' + what)
        except OSError:
            pass
    try:
        os.listdir('/proc/%d/fd' % PARENT)
        found.append('the parent\'s descriptors')
    except OSError:
        pass
    try:
        with open(PLANTED) as fh:
            fh.read()
        found.append('a world-readable host file')
    except OSError:
        pass
    try:
        with open(os.path.join(os.path.dirname(PLANTED), 'written-' + me), 'w') as fh:
            fh.write('x')
        found.append('a write outside the work dir')
    except OSError:
        pass
    return found
"""


def leaks(setup, run_case, limits) -> str | None:
    """None when nothing of the host is reachable under `setup`, else what
    was. `run_case(case, limits, setup, audit_hook)` is the runner's."""
    folder = tempfile.mkdtemp(prefix="tasksieve-probe-")
    try:
        os.chmod(folder, 0o777)  # readable and writable by anyone: only the sandbox may keep it out
        planted = os.path.join(folder, "planted.txt")
        with open(planted, "w") as fh:
            fh.write("host data")
        os.chmod(planted, 0o644)
        pid_ns = "--pid" in setup.prefix  # then not even the parent's pid may be seen to exist
        head = f"PARENT = {os.getpid()}\nPLANTED = {planted!r}\nPID_NS = {pid_ns}\n" + _CHECKS
        case = {
            "solution": head + "print(_leaks(), flush=True)\ndef f():\n    return _leaks()\n",
            "tests": head + "assert _leaks() == []\nassert f() == []\n",
            "entry_point": "f",
            "call_check": False,
        }
        try:
            res, out, _ = run_case(case, limits, setup, False)
        except Exception as e:  # noqa: BLE001 - a probe that cannot run is a mode that is not used
            return f"isolation probe: {type(e).__name__}: {e}"
        if res.passed:
            return None
        seen = out.strip().splitlines()[-1:] or [res.error or "failed"]
        return f"isolation probe: {seen[0][:300]}"
    finally:
        shutil.rmtree(folder, ignore_errors=True)
