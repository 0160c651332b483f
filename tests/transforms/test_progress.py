"""One progress renderer (transforms/progress.py, tqdm) for every stage
(issue 47): a line never lands inside a bar, one sampling bar per process
(its counting: tests/sample/test_attempt_bar.py), --quiet and --log-level
on every command, and a log file in OUT."""

import io
import json
import os
import re
import subprocess
import sys

import pytest

from tasksieve.transforms import progress
from tasksieve.transforms.sample import transform

TASKSIEVE = [sys.executable, "-m", "tasksieve.pipeline.cli"]


class _Tty(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture
def tty(monkeypatch):
    """A terminal on stderr. Installed by the test itself (`terminal`):
    pytest puts its own capture in place between the fixtures and the test."""
    err = _Tty()
    monkeypatch.delenv(progress.QUIET_ENV, raising=False)
    monkeypatch.delenv("TASKSIEVE_LOG_LEVEL", raising=False)
    yield err
    if transform._Progress._bar is not None:
        transform._Progress._bar.close()
    transform._Progress._bar = None


def terminal(monkeypatch, err):
    monkeypatch.setattr(sys, "stderr", err)


def _segments(text: str) -> list[str]:
    """What the terminal shows line by line: carriage returns and newlines split."""
    return [s.strip() for s in re.split(r"[\r\n]", text) if s.strip()]


def test_a_stage_line_is_printed_above_the_sampling_bar_never_inside_it(tty, monkeypatch):
    terminal(monkeypatch, tty)
    sampling = transform._Progress.get(10, 4)  # the sampling bar is on the terminal
    sampling.generated(2)
    step = progress.Progress("dedup: kept", total=None, every_s=0.0)
    step.setup()
    list(step.process((5, "chunk")))
    step.teardown()
    progress.say("  validate: read done in 0.1s")
    shown = _segments(tty.getvalue())
    for line in ("dedup: kept: 5 rows", "dedup: kept (done): 5 rows", "validate: read done in 0.1s"):
        hits = [s for s in shown if line in s]
        assert hits and all(not s.startswith("sampling+verifying") for s in hits), shown
        assert any(s.startswith(line) for s in hits), (line, hits)
    assert any(s.startswith("sampling+verifying") for s in shown)


def test_one_sampling_bar_per_process_shared_by_its_groups_until_it_closes(tty, monkeypatch):
    terminal(monkeypatch, tty)
    first = transform._Progress.get(2, 4)
    assert transform._Progress.get(2, 4) is first  # a second group in this process: the same bar
    first.decided(4)
    first.decided(4)
    assert first.closed
    assert transform._Progress.get(2, 4) is not first  # the next run in this process: a new bar
    meter = _segments(tty.getvalue())
    assert any("attempt" in s and "2/2 tasks decided" in s for s in meter), meter


def test_quiet_shows_nothing_but_still_logs(tty, monkeypatch):
    import logging

    terminal(monkeypatch, tty)
    monkeypatch.setenv(progress.QUIET_ENV, "1")
    kept = io.StringIO()
    handler = logging.StreamHandler(kept)
    ours = logging.getLogger("tasksieve")
    level = ours.level
    ours.addHandler(handler)
    ours.setLevel(logging.INFO)
    try:
        progress.say("  read+validate (done): 3 rows, 3 rows/s")
        b = progress.bar(3, "x", "task")
        b.update(3)
        b.close()
    finally:
        ours.removeHandler(handler)
        ours.setLevel(level)
    assert tty.getvalue() == ""
    assert "read+validate (done)" in kept.getvalue()


def _cli(*args, cwd=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TASKSIEVE_")}
    return subprocess.run(
        [*TASKSIEVE, *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
        env=dict(env, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1"),
    )


@pytest.mark.slow
def test_every_command_takes_quiet_and_log_level(tmp_path):
    for command in ("run", "dedup", "validate", "select", "report", "export", "sample-data", "prepare-model"):
        for flag in ("--quiet", "-q", "--log-level"):
            helptext = _cli(command, "--help").stdout
            assert flag in helptext, (command, flag)


@pytest.mark.slow
def test_dedup_writes_a_log_in_out_and_quiet_silences_progress(tmp_path):
    rows = [{"task_id": f"t{i}", "prompt": f"Calculate {i} + 40.", "answer": str(i + 40)} for i in range(5)]
    delivery = tmp_path / "d.jsonl"
    delivery.write_text("".join(json.dumps(r) + "\n" for r in rows))
    loud = _cli("dedup", "--input", str(delivery), "--out", str(tmp_path / "o"))
    assert loud.returncode == 0, loud.stderr[-2000:]
    assert "read+validate (done)" in loud.stderr
    log = (tmp_path / "o" / "tasksieve.log").read_text()
    assert "dedup --input" in log and "read+validate (done): 5 rows" in log
    quiet = _cli("dedup", "--input", str(delivery), "--out", str(tmp_path / "o"), "--quiet")
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    assert "run " in quiet.stdout  # the result is still printed
    assert (tmp_path / "o" / "tasksieve.log").read_text().count("read+validate (done)") == 2  # appended
    warn = _cli("--log-level", "warning", "dedup", "--input", str(delivery), "--out", str(tmp_path / "o"))
    assert warn.returncode == 0 and "read+validate" not in warn.stderr
    # A link planted at the log's name is replaced, never written through.
    target = tmp_path / "victim.txt"
    target.write_text("keep\n")
    (tmp_path / "o" / "tasksieve.log").unlink()
    (tmp_path / "o" / "tasksieve.log").symlink_to(target)
    again = _cli("dedup", "--input", str(delivery), "--out", str(tmp_path / "o"))
    assert again.returncode == 0, again.stderr[-2000:]
    assert target.read_text() == "keep\n"
    assert not (tmp_path / "o" / "tasksieve.log").is_symlink()


def test_the_log_file_drops_a_record_it_cannot_write_without_a_traceback(tmp_path, capsys):
    import errno
    import logging

    from tasksieve.pipeline.outputs import logfile

    class Full(io.StringIO):
        def write(self, s):
            raise OSError(errno.ENOSPC, "No space left on device")

    assert logfile.attach(tmp_path) == tmp_path / "tasksieve.log"
    try:
        logfile._handler.stream = Full()
        logging.getLogger("tasksieve").warning("a line the full disk will not take")
    finally:
        logfile.detach()
    assert capsys.readouterr().err == ""


def test_the_log_file_is_not_opened_through_a_fifo(tmp_path, capsys):
    from tasksieve.pipeline.outputs import logfile

    os.mkfifo(tmp_path / "tasksieve.log")
    assert logfile.attach(tmp_path) is None  # refused at once, never blocked on
    assert "no log file" in capsys.readouterr().err


def test_report_on_a_folder_without_a_run_leaves_no_log_there(tmp_path, capsys):
    from tasksieve.pipeline.cli import main

    (tmp_path / "notes.txt").write_text("mine")
    assert main(["report", str(tmp_path)]) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
