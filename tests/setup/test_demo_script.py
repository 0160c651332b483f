"""README command one (scripts/demo.sh) lays out its folders so that every
command in it is accepted: the sample delivery it writes and the output
folder it curates into are taken from the script itself, and the same
layout is run through `sample-data` and `dedup` (the output-folder checks
of `run`, without the model). A sample written inside the output folder
made `run` refuse a non-empty folder holding no run: the demo died."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DEMO = Path(__file__).resolve().parents[2] / "scripts" / "demo.sh"
TASKSIEVE = [sys.executable, "-m", "tasksieve.pipeline.cli"]


def _demo_paths(out: str) -> tuple[str, str, str]:
    """(sample-data target, run --input, run --out) as demo.sh writes them, for OUT=out."""
    text = DEMO.read_text(encoding="utf-8").replace("$out", out)
    sample = re.search(r'tasksieve sample-data "([^"]+)"', text).group(1)
    run = re.search(r'tasksieve run --input "([^"]+)" --out "([^"]+)"', text)
    return sample, run.group(1), run.group(2)


@pytest.mark.slow
def test_the_demo_layout_is_accepted_twice(tmp_path):
    sample, inputs, out = _demo_paths(str(tmp_path / "demo-out"))
    assert not Path(sample).resolve().is_relative_to(Path(out).resolve())
    for _ in range(2):  # a second demo.sh into the same folders works too
        p = subprocess.run([*TASKSIEVE, "sample-data", sample], capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        p = subprocess.run(
            [*TASKSIEVE, "dedup", "--input", inputs, "--out", out], capture_output=True, text=True, timeout=600
        )
        assert p.returncode == 0, p.stderr
