"""Misuse of the command line, as a table: each bad flag, path or file
gets its exit code and exactly one line on stderr (no usage block, no
traceback), before any work is done."""

import os
import subprocess
import sys

import pytest

from tasksieve.pipeline import cli
from tasksieve.pipeline.run.folders import hold_output

TASKSIEVE = [sys.executable, "-m", "tasksieve.pipeline.cli"]
ENV = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")


@pytest.fixture
def world(tmp_path):
    """A delivery, a plain file, a FIFO and a folder with a delivery in it."""
    (tmp_path / "d.jsonl").write_text('{"task_id": "t", "prompt": "Calculate 2 + 40.", "answer": "42"}\n')
    (tmp_path / "a_file").write_text("x")
    (tmp_path / "notes.txt").write_text("x")
    os.mkfifo(tmp_path / "pipe.jsonl")
    (tmp_path / "folder").mkdir()
    (tmp_path / "held").mkdir()
    (tmp_path / "folder" / "d.jsonl").write_text((tmp_path / "d.jsonl").read_text())
    return tmp_path


# (case, argv with {t} for the test folder, exit code, the start of the one line)
MISUSE = [
    (
        "unknown flag",
        "run -i {t}/d.jsonl -o {t}/o --bogus-flag 3",
        2,
        "tasksieve: error: unrecognized argument '--bogus-flag': neither a tasksieve option nor an Apache Beam "
        "pipeline option",
    ),
    (
        "misspelt flag",
        "dedup -i {t}/d.jsonl -o {t}/o --dedup-agianst x",
        2,
        "tasksieve: error: unrecognized argument '--dedup-agianst': neither a tasksieve option nor an Apache Beam "
        "pipeline option (did you mean --dedup-against?)",
    ),
    (
        "missing required flag",
        "run -o {t}/o",
        2,
        "tasksieve: error: the following arguments are required: --input/-i (see tasksieve run --help)",
    ),
    ("unknown command", "curate {t}", 2, "tasksieve: error: argument command: invalid choice: 'curate'"),
    ("extra argument to report", "report {t} --bogus", 2, "tasksieve: error: unrecognized arguments: --bogus"),
    (
        "unknown runner",
        "run -i {t}/d.jsonl -o {t}/o --runner NoSuchRunner",
        1,
        "tasksieve: error: unknown --runner 'NoSuchRunner': use inprocess (the default), dask, or a Beam runner",
    ),
    (
        "attempt cache is a file",
        "run -i {t}/d.jsonl -o {t}/o --attempt-cache {t}/a_file",
        1,
        "tasksieve: error: --attempt-cache {t}/a_file is a file, not a folder",
    ),
    (
        "attempt cache inside an input",
        "run -i {t}/folder -o {t}/o --attempt-cache {t}/folder/cache",
        1,
        "tasksieve: error: --attempt-cache {t}/folder/cache is inside the --input folder {t}/folder",
    ),
    (
        "out is a file",
        "dedup -i {t}/d.jsonl -o {t}/a_file",
        1,
        "tasksieve: error: --out {t}/a_file is a file, not a folder",
    ),
    (
        "out not writable",
        "dedup -i {t}/d.jsonl -o /proc/self",
        1,
        "tasksieve: error: output folder /proc/self is not writable",
    ),
    (
        "out inside an input",
        "dedup -i {t}/folder -o {t}/folder/out",
        1,
        "tasksieve: error: --out {t}/folder/out is inside the --input folder {t}/folder",
    ),
    (
        "save index inside an input",
        "dedup -i {t}/folder -o {t}/o --dedup-against {t}/d.jsonl --save-index {t}/folder/idx",
        1,
        "tasksieve: error: --save-index {t}/folder/idx is inside the --input folder",
    ),
    (
        "out in use",
        "run -i {t}/d.jsonl -o {t}/held",
        1,
        "tasksieve: error: output folder {t}/held is in use by tasksieve run (pid",
    ),
    ("missing input", "run -i {t}/nope.jsonl -o {t}/o", 1, "tasksieve: error: input not found: {t}/nope.jsonl"),
    (
        "input of unknown format",
        "dedup -i {t}/notes.txt -o {t}/o",
        1,
        "tasksieve: error: input {t}/notes.txt: unknown format (not a delivery file",
    ),
    (
        "input is a FIFO",
        "dedup -i {t}/pipe.jsonl -o {t}/o",
        1,
        "tasksieve: error: input {t}/pipe.jsonl is a FIFO, not a file or folder; it is not read",
    ),
    ("k below 1", "run -i {t}/d.jsonl -o {t}/o -k 0", 1, "tasksieve: error: -k must be at least 1"),
    (
        "dask workers below 1",
        "dedup -i {t}/d.jsonl -o {t}/o --dask-workers 0",
        1,
        "tasksieve: error: --dask-workers must be at least 1",
    ),
    (
        "save index without a pool",
        "dedup -i {t}/d.jsonl -o {t}/o --save-index {t}/idx",
        1,
        "tasksieve: error: --save-index needs --dedup-against",
    ),
    (
        "sample data onto a file",
        "sample-data {t}/a_file",
        1,
        "tasksieve: error: cannot write the sample into {t}/a_file: Not a directory",
    ),
    ("report without a database", "report {t}/folder", 1, "tasksieve: error: no curation.duckdb at"),
    ("report on a file", "report {t}/a_file", 1, "tasksieve: error: no curation.duckdb at"),
    (
        "validate a missing delivery",
        "validate {t}/nope.jsonl --out {t}/v",
        2,
        "tasksieve: error: input not found: {t}/nope.jsonl",
    ),
    (
        "validate into the delivery folder",
        "validate {t}/folder --out {t}/folder/v",
        2,
        "tasksieve: error: --out {t}/folder/v is inside the delivery folder {t}/folder",
    ),
]


@pytest.mark.parametrize("case,argv,code,line", MISUSE, ids=[m[0] for m in MISUSE])
def test_misuse_gets_its_exit_code_and_one_line(world, case, argv, code, line):
    t = str(world)
    args = argv.format(t=t).split()
    with hold_output(world / "held", "run") if case == "out in use" else _nothing():
        proc = subprocess.run([*TASKSIEVE, *args], capture_output=True, text=True, env=ENV, timeout=300)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == code, proc.stderr
    assert len(lines) == 1, proc.stderr  # one line, nothing else: no usage block, no warning, no traceback
    assert lines[0].startswith(line.format(t=t)), (lines[0], line.format(t=t))
    assert proc.stdout == ""
    if code == 1 and args[0] in ("run", "dedup") and case != "out in use":
        assert not (world / "o" / "curation.duckdb").exists() and not (world / "o" / "_staging").exists()


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def test_validate_reports_an_internal_error_in_one_line_with_its_own_exit_code(world, monkeypatch, capsys):
    import tasksieve.pipeline.validate.command as vd

    def broken(*a, **k):
        raise ZeroDivisionError("a bug in a check")

    monkeypatch.setattr(vd, "validate_delivery", broken)
    code = cli.main(["validate", str(world / "d.jsonl"), "--out", str(world / "v")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == cli.EXIT_VALIDATE_INTERNAL == 3
    assert err == ["tasksieve: internal error: the delivery was not judged: ZeroDivisionError: a bug in a check"]
