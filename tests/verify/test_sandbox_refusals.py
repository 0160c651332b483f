"""The sandbox's refusals (issue 48, split from test_sandbox_fallback.py):
without Landlock the fallback refuses, a fallback that leaks fails its
start-up probe, and a verdict without the harness key never passes; in
each refusal code tasks are dropped (no_safe_sandbox), never run."""

import shutil

import pytest

from tasksieve.transforms.verify.sandbox import runner as sandbox
from tasksieve.transforms.verify.sandbox import verdict as sandbox_verdict

pytestmark = pytest.mark.slow


CODE_TASK = {
    "domain": "code",
    "entry_point": "f",
    "prompt": "double x",
    "tests": "assert f(2) == 4",
    "reference_solution": "def f(x):\n    return 2 * x\n",
}


def _hide_bwrap(monkeypatch):
    real_which = shutil.which
    monkeypatch.setattr(
        sandbox.shutil, "which", lambda name, *a, **k: None if name == "bwrap" else real_which(name, *a, **k)
    )


def _assert_code_tasks_dropped():
    from tasksieve.schemas.config import VerifyConfig
    from tasksieve.transforms.verify.sanity import check_verifier
    from tasksieve.transforms.verify.verifiers import verify_code

    with pytest.raises(sandbox.NoSafeSandbox):
        sandbox.resolve_mode("auto")
    assert "no_safe_sandbox" in sandbox.describe("auto")
    verdict = verify_code(CODE_TASK, "def f(x):\n    return 2 * x\n", VerifyConfig())
    assert not verdict["passed"] and verdict["error"] == "no_safe_sandbox"
    sane = check_verifier(CODE_TASK, VerifyConfig())
    assert sane["broken"] and "no_safe_sandbox" in sane["reasons"]


def test_without_landlock_the_fallback_refuses(monkeypatch):
    """A kernel without Landlock (simulated: its system calls renumbered to
    ones that do not exist) leaves the fallback nothing to hold the host
    with: the guard refuses, rlimit is not usable, and `auto` without
    bubblewrap drops code tasks. bwrap does not depend on it."""
    guard = sandbox._SOURCES["sandbox_guard"]
    line = "_SYS_CREATE, _SYS_ADD, _SYS_RESTRICT = 444, 445, 446"
    assert line in guard
    sources = dict(
        sandbox._SOURCES, sandbox_guard=guard.replace(line, "_SYS_CREATE, _SYS_ADD, _SYS_RESTRICT = 1444, 1445, 1446")
    )
    monkeypatch.setattr(sandbox, "_SOURCES", sources)
    monkeypatch.setattr(sandbox, "_BOOT", {role: sandbox._boot(role) for role in sandbox._BOOT})
    monkeypatch.setattr(sandbox, "_CACHE", {})
    if shutil.which("bwrap"):
        try:
            assert sandbox.resolve_mode("bwrap") == "bwrap"
        except sandbox.NoSafeSandbox:
            pass  # bubblewrap not usable here at all
        monkeypatch.setattr(sandbox, "_CACHE", {})
    with pytest.raises(sandbox.NoSafeSandbox, match="landlock"):
        sandbox.resolve_mode("rlimit")
    _hide_bwrap(monkeypatch)
    _assert_code_tasks_dropped()


def test_a_fallback_that_leaks_fails_its_start_up_probe(monkeypatch):
    """The isolation is tried, not assumed: the fallback as it was before
    (no Landlock) sees the host in the probe, so it is refused with what
    leaked, and code tasks are dropped rather than run in it."""
    monkeypatch.setattr(sandbox, "FALLBACK_CONFINE", "off")
    monkeypatch.setattr(sandbox, "_CACHE", {})
    with pytest.raises(sandbox.NoSafeSandbox, match="isolation probe") as refused:
        sandbox.resolve_mode("rlimit")
    assert "world-readable host file" in str(refused.value)
    _hide_bwrap(monkeypatch)
    _assert_code_tasks_dropped()


def test_a_verdict_without_the_harness_key_is_refused():
    """The verdict line is signed with a key only the harness was given: a
    well-formed passing line without it (or with another) never passes."""
    setup = sandbox._Setup("rlimit", (), sandbox.PYTHON, None, False)
    for line in (
        b'{"passed": true, "error": null, "calls": 1}',
        b'{"passed": true, "error": null, "key": "0000"}',
        b'["passed", true]',
    ):
        res = sandbox_verdict.decide(line, False, [], sandbox.Limits(), setup, "", "f" * 32)
        assert not res.passed and res.error.startswith("harness_error"), line
    good = sandbox_verdict.decide(
        b'{"passed": true, "error": null, "key": "' + b"f" * 32 + b'"}',
        False,
        [],
        sandbox.Limits(),
        setup,
        "",
        "f" * 32,
    )
    assert good.passed
