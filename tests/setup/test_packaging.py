"""A built wheel holds every module of the package, and its data files:
sub-packages are discovered by setuptools, never listed by hand."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {
    "schemas": "tasksieve/schemas",
    "transforms": "tasksieve/transforms",
    "pipeline": "tasksieve/pipeline",
    "tasksieve": "tasksieve",
}


def _expected() -> set[str]:
    want = set()
    for folder, inside in FOLDERS.items():
        for f in (ROOT / folder).rglob("*"):
            if f.is_file() and f.suffix in (".py", ".toml") and "__pycache__" not in f.parts:
                rel = f.relative_to(ROOT / folder).as_posix()
                want.add(f"{inside}/{rel}")
    return want


@pytest.mark.slow
def test_the_wheel_contains_every_module_and_data_file(tmp_path):
    # Built as a user would (pip's isolated build with the declared backend).
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = tmp_path.glob("tasksieve-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    want = _expected()
    assert len(want) > 60
    assert "tasksieve/transforms/verify/sandbox/guard.py" in want
    assert "tasksieve/schemas/profiles/default.toml" in want
    assert want - names == set()
