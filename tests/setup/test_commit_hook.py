"""The commit-msg hook holds the house rule on commit subjects: under 80
characters, a blank line before the body."""

import subprocess
from pathlib import Path

import pytest

HOOK = Path(__file__).resolve().parents[2] / "scripts" / "git-hooks" / "commit-msg"


def _hook(tmp_path, message: str) -> subprocess.CompletedProcess:
    msg = tmp_path / "COMMIT_EDITMSG"
    msg.write_text(message)
    return subprocess.run(["bash", str(HOOK), str(msg)], capture_output=True, text=True)


@pytest.mark.parametrize(
    "message",
    [
        "sandbox: a fresh child per case\n\nThe body may run long " + "x" * 200 + "\n",
        "x" * 79 + "\n",
        "# a comment line git strips\nshort subject\n",
        "Merge branch 'a-very-long-branch-name' " + "y" * 80 + "\n",
    ],
)
def test_a_subject_under_80_characters_is_accepted(tmp_path, message):
    assert _hook(tmp_path, message).returncode == 0


@pytest.mark.parametrize(
    "message, why",
    [
        ("x" * 80 + "\n", "80 characters"),
        ("a subject\nthe body glued to it\n", "second line blank"),
    ],
)
def test_a_long_subject_or_a_glued_body_is_refused_with_the_reason(tmp_path, message, why):
    r = _hook(tmp_path, message)
    assert r.returncode == 1 and why in r.stderr
