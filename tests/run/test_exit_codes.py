"""One exit-code table for every command (README, "Exit codes"): the same
failure gets the same code whichever command meets it, and the one line
says how to go on (a hub id given as --input, DuckDB without a `duckdb`
program). Issue 47."""

import json
import os
import shlex
import subprocess
import sys

import pytest

from tasksieve.pipeline.cli import main

TASKSIEVE = [sys.executable, "-m", "tasksieve.pipeline.cli"]
ENV = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")


def _cli(*args, cwd=None):
    return subprocess.run([*TASKSIEVE, *args], capture_output=True, text=True, env=ENV, timeout=300, cwd=cwd)


def _one_line(proc) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.mark.slow
def test_a_missing_input_is_exit_2_in_every_command(tmp_path):
    nope = str(tmp_path / "nope.jsonl")
    for argv in (
        ["run", "-i", nope, "-o", str(tmp_path / "o")],
        ["dedup", "-i", nope, "-o", str(tmp_path / "o")],
        ["validate", nope, "--out", str(tmp_path / "v")],
    ):
        proc = _cli(*argv)
        assert proc.returncode == 2, (argv, proc.stderr)
        assert _one_line(proc) == f"tasksieve: error: input not found: {nope}"


@pytest.mark.slow
def test_a_bad_config_is_exit_2_in_every_command(tmp_path):
    delivery = tmp_path / "d.jsonl"
    delivery.write_text(json.dumps({"task_id": "t", "prompt": "Calculate 2 + 40.", "answer": "42"}) + "\n")
    bad = tmp_path / "bad.toml"
    bad.write_text("[sampling]\nk = -4\n")
    (tmp_path / "out").mkdir()
    for argv in (
        ["run", "-i", str(delivery), "-o", str(tmp_path / "o"), "--config", str(bad)],
        ["dedup", "-i", str(delivery), "-o", str(tmp_path / "o"), "--config", str(bad)],
        ["select", str(tmp_path / "out"), "--budget-tasks", "3", "--config", str(bad)],
        ["validate", str(delivery), "--out", str(tmp_path / "v"), "--config", str(bad)],
    ):
        proc = _cli(*argv)
        assert proc.returncode == 2, (argv, proc.stderr)
        assert "sampling.k" in _one_line(proc), argv


def test_a_hub_id_as_input_gets_a_hint(tmp_path, capsys):
    os.chdir(tmp_path)
    assert main(["dedup", "--input", "HuggingFaceH4/MATH-500", "--out", str(tmp_path / "o")]) == 2
    line = capsys.readouterr().err.strip()
    assert line.startswith("tasksieve: error: input not found: HuggingFaceH4/MATH-500; ")
    assert "looks like a Hugging Face hub id" in line and "save_to_disk('MATH-500')" in line
    assert "--input MATH-500" in line
    # A path that is plainly a file gets no hint.
    assert main(["dedup", "--input", "deliveries/batch.jsonl", "--out", str(tmp_path / "o")]) == 2
    assert "hub id" not in capsys.readouterr().err


@pytest.mark.slow
def test_dedup_names_a_duckdb_query_that_runs_with_the_installed_python(tmp_path, capsys):
    rows = [
        {"task_id": "a", "prompt": "Calculate 2 + 40.", "answer": "42"},
        {"task_id": "b", "prompt": "Calculate 2 + 40.", "answer": "42"},
    ]
    delivery = tmp_path / "d.jsonl"
    delivery.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["dedup", "--input", str(delivery), "--out", str(tmp_path / "o")]) == 0
    line = next(l for l in capsys.readouterr().out.splitlines() if l.startswith("evidence: "))
    command = line[len("evidence: ") :]
    assert not command.startswith("duckdb ")  # no `duckdb` program is installed with tasksieve
    assert shlex.split(command)[0] == sys.executable
    proc = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=120, env=ENV)
    assert proc.returncode == 0, proc.stderr
    assert "exact_dedup" in proc.stdout and "drop_reason" in proc.stdout


def test_readme_has_one_exit_code_table_for_every_command():
    text = open(README, encoding="utf-8").read()
    table = text[text.index("| exit | meaning") :].split("\n\n")[0]
    codes = [line.split("|")[1].strip() for line in table.splitlines()[2:]]
    assert codes == ["0", "1", "2", "3", "4", "5", "6", "130"], codes
    for command in ("run", "dedup", "validate", "select", "export", "report"):
        assert f"`{command}`" in table or command in table, command
