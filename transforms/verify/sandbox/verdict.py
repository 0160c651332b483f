"""A case's verdict, decided by the parent from what came back: the
harness's signed verdict line (a line without its key is forged), or else
how the two processes ended (signals of the CPU and file-size limits,
seccomp, a timeout). Host side, stdlib only (runner.py and pool.py's
callers use it)."""

from __future__ import annotations

import json
import logging
import secrets
import signal
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Limits:
    cpu_seconds: int = 5
    wall_seconds: float = 10.0
    memory_mb: int = 512
    output_bytes: int = 64 * 1024


@dataclass
class CaseResult:
    passed: bool
    error: str | None


def signal_of(rc: int | None, setup) -> int | None:
    if rc is None:
        return None
    if rc < 0:
        return -rc
    if (setup.mode == "bwrap" or "--pid" in setup.prefix) and rc > 128:  # an init's report of its child
        return rc - 128
    return None


def decide(
    line: bytes | None, timed_out: bool, procs: list, limits: Limits, setup, harness_err: str, key: str
) -> CaseResult:
    attempt_sig = signal_of(procs[0].returncode, setup) if procs else None
    if line is not None:
        try:
            d = json.loads(line)
            passed, error = d["passed"] is True, d.get("error")
            error = None if error is None else str(error)[:300]
            forged = not secrets.compare_digest(str(d.get("key")), key)
        except (ValueError, KeyError, TypeError, AttributeError):
            return CaseResult(False, "harness_error: unreadable verdict")
        if forged:  # someone but the harness wrote on its pipe: the sandbox failed
            log.warning("sandbox: a verdict without the harness's key; the case fails")
            return CaseResult(False, "harness_error: forged verdict")
        if error == "exited_early" and attempt_sig:
            error = by_signal(attempt_sig, limits)
        return CaseResult(passed and error is None, error)
    if timed_out:
        return CaseResult(False, "timeout")
    harness_sig = signal_of(procs[1].returncode, setup) if len(procs) > 1 else None
    if harness_sig:
        return CaseResult(False, by_signal(harness_sig, limits) + " (in the tests)")
    last = (harness_err.strip().splitlines() or [""])[-1]
    if "refusing" in last:  # sandbox_guard would not run untrusted code (root, capabilities)
        return CaseResult(False, f"harness_error: {last[:200]}")
    if "MemoryError" in last:
        return CaseResult(False, "memory (in the tests)")
    return CaseResult(False, f"harness_error: exit code {procs[1].returncode if len(procs) > 1 else None}")


def by_signal(sig: int, limits: Limits) -> str:
    if sig == signal.SIGXCPU:
        return f"timeout: over {limits.cpu_seconds}s of CPU"
    if sig == signal.SIGXFSZ:
        return "output_too_large"
    if sig == signal.SIGSYS:
        return "blocked: system call"
    return f"killed: signal {sig}"
