"""Build the near-dedup kernels ahead of time (kernels.py): one extension
module for this CPU, this numba and this version of kernels.py, which
`kernels.get()` then loads instead of starting numba's JIT (~0.5 s of
every run). scripts/setup.sh runs it; a failed build is not fatal: every
run then takes the JIT path, with the same bits.

    .venv/bin/python -m tasksieve.transforms.dedup.kernels_build [--force]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import warnings
from pathlib import Path

from tasksieve.transforms.dedup import kernels


def build(folder: Path | None = None, force: bool = False) -> Path:
    """The built module's path (built now unless it exists). Written under a
    temporary name and renamed, so a run never loads a half-written file;
    builds for other versions of the kernels are removed."""
    folder = folder or kernels.PREBUILT_DIR
    name = kernels.prebuilt_name()
    if name is None:
        raise RuntimeError("this machine's CPU flags cannot be read (/proc/cpuinfo): the JIT kernels will be used")
    target = kernels.prebuilt_path(name, folder)
    if target.is_file() and not force:
        return target
    folder.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numba.pycc announces its deprecation
        import numba
        from numba.pycc import CC

        kernels.jit_callees(numba.njit(nogil=True))
        with tempfile.TemporaryDirectory(dir=folder) as tmp:
            cc = CC(name)
            cc.output_dir, cc.target_cpu, cc.verbose = tmp, "host", False
            for export, types in kernels.SIGNATURES.items():
                cc.export(export, f"void({', '.join(types)})")(kernels.SOURCES[export])
            cc.compile()
            os.replace(kernels.prebuilt_path(name, Path(tmp)), target)
    for old in folder.glob("kernels_*"):
        if old != target and old.is_file():
            old.unlink()
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--force", action="store_true", help="build again even if a build exists")
    args = parser.parse_args(argv)
    try:
        path = build(force=args.force)
    except Exception as e:  # never fatal: the JIT kernels give the same bits
        print(
            f"kernels not built ahead of time ({type(e).__name__}: {e}); runs will compile them "
            f"on first use instead (~0.5 s a run)",
            file=sys.stderr,
        )
        return 1
    print(f"kernels built ahead of time: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
