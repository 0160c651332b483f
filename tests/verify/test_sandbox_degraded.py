"""Degraded kernels must not silently give a weaker sandbox (attacks/seccomp_missing.py,
attacks/landlock_missing_bwrap_pool_leak.py)."""

import shutil

import pytest

from tasksieve.transforms.verify.sandbox import mounts, runner


def test_a_sandbox_without_seccomp_is_refused(monkeypatch):
    """A kernel where the filter cannot be loaded: no mode is usable (code tasks are dropped)."""
    if not shutil.which("bwrap"):
        pytest.skip("bubblewrap not installed")
    sources = dict(runner._SOURCES)
    old = "if libc.prctl(22, 2, ctypes.addressof(prog), 0, 0) != 0:"
    assert old in sources["sandbox_seccomp"]
    sources["sandbox_seccomp"] = sources["sandbox_seccomp"].replace(old, "if True:")
    monkeypatch.setattr(runner, "_SOURCES", sources)
    monkeypatch.setattr(runner, "_BOOT", {r: runner._boot(r) for r in runner._BOOT})
    monkeypatch.setattr(runner, "_CACHE", {})
    # The probe fails (without the refusal it passed, and bwrap was used with no
    # filter); its reason is the harness's "refusing ... seccomp" line, or, when
    # the parent ends the group first on a loaded machine, the harness's kill.
    with pytest.raises(runner.NoSafeSandbox, match="start-up probe"):
        runner.resolve_mode("bwrap")


def test_bwrap_dev_is_read_only():
    """Non-root, bwrap's /dev (and /dev/shm) belong to the sandbox user: without Landlock a pooled
    case could leave a file there for the next one. /dev is remounted read-only after it is made."""
    argv = mounts.bwrap_prefix(2**20)
    dev = [i for i in range(len(argv) - 1) if argv[i] == "--dev" and argv[i + 1] == "/dev"][0]
    assert any(argv[i] == "--remount-ro" and argv[i + 1] == "/dev" for i in range(dev + 2, len(argv) - 1))
