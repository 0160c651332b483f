"""The programs that run inside the sandbox, as text: read once from the
files beside this one and handed to the interpreter on its command line
(`-c`), so the sandbox needs no file of the host. Inside, each keeps a
`sandbox_*` module name: the libraries (codec.py, seccomp.py, guard.py) are
loaded as modules first, in that order, then the role runs as __main__.
Host side, stdlib only (runner.py and pool.py build the boot programs)."""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).parent
# Loaded before any role, each able to import those before it.
LIBRARIES = ("sandbox_codec", "sandbox_seccomp", "sandbox_guard")
ROLES = ("sandbox_attempt", "sandbox_harness", "sandbox_worker")


def read_sources() -> dict[str, str]:
    """{sandbox module name: its source}, for the libraries and the roles."""
    return {name: (_HERE / f"{name.removeprefix('sandbox_')}.py").read_text() for name in (*LIBRARIES, *ROLES)}


def load_libraries(sources: dict[str, str]) -> str:
    """The start of a boot program: every library registered as its module."""
    lines = ["import sys, types"]
    for name in LIBRARIES:
        lines += [
            f"m = types.ModuleType({name!r})",
            f"sys.modules[{name!r}] = m",
            f"exec(compile({sources[name]!r}, '{name}.py', 'exec'), m.__dict__)",
        ]
    return "\n".join(lines) + "\n"
