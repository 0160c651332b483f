"""The output folder is the command's own: two commands into one --out
(the second refuses at once; the first's outputs are intact), `dedup`
into a folder a `run` wrote (the run's training set and attempts stay),
and paths that would break SQL built from strings (an apostrophe, a space)."""

import hashlib
import os
import subprocess
import sys

import duckdb
import pyarrow.parquet as pq
import pytest

from fake_openai import FakeOpenAI, run_config, write_tasks
from fakes import scripted_backend
from tasksieve.pipeline.run.errors import RunError
from tasksieve.pipeline.run.folders import hold_output
from tasksieve.pipeline.run.command import run
from tasksieve.schemas.config import RunConfig

TASKSIEVE = [sys.executable, "-m", "tasksieve.pipeline.cli"]
ENV = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _tasksieve_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("tasksieve:")]


def test_the_output_lock_refuses_a_second_holder(tmp_path):
    with hold_output(tmp_path, "run"):
        with pytest.raises(RunError, match=r"is in use by tasksieve run \(pid \d+"):
            with hold_output(tmp_path, "dedup"):
                pass
    with hold_output(tmp_path, "dedup"):  # released when the first ended
        pass


@pytest.mark.slow
def test_two_runs_into_one_folder_the_second_refuses_and_the_first_is_intact(tmp_path):
    server = FakeOpenAI(gated=True)  # holds the first run inside sampling until the test lets it go
    try:
        tasks = write_tasks(tmp_path / "tasks.jsonl", 6)
        cfg = run_config(tmp_path / "run.toml", server.url)
        out = tmp_path / "out"
        cmd = [*TASKSIEVE, "run", "--input", tasks, "--out", str(out), "--config", cfg]
        first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
        try:
            assert server.arrived.wait(timeout=240), "the first run never started sampling"
            second = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=240)
            dedup = subprocess.run(
                [*TASKSIEVE, "dedup", "--input", tasks, "--out", str(out)],
                capture_output=True,
                text=True,
                env=ENV,
                timeout=240,
            )
            hits_while_held = server.hits
        finally:
            server.open_gate()
            stdout, stderr = first.communicate(timeout=600)
        for refused in (second, dedup):
            assert refused.returncode == 1, refused.stderr
            assert refused.stderr.strip().splitlines() == _tasksieve_lines(refused.stderr)  # one line, nothing else
            (line,) = _tasksieve_lines(refused.stderr)
            assert f"output folder {out} is in use by tasksieve run (pid {first.pid}" in line
            assert "Traceback" not in refused.stderr
        assert hits_while_held <= 2  # the second run asked the server for nothing (the first: <= concurrency)
        assert first.returncode == 0, stderr[-3000:]
        assert "row accounting: rows_in 6 ==" in stdout
        results = pq.read_table(out / "results.parquet").to_pylist()
        assert len(results) == 6 and len({r["run_id"] for r in results}) == 1
        run_id = results[0]["run_id"]
        con = duckdb.connect(str(out / "curation.duckdb"), read_only=True)
        try:
            assert con.execute("select run_id from runs").fetchall() == [(run_id,)]
            assert con.execute("select count(*), min(run_id), max(run_id) from tasks").fetchone() == (6, run_id, run_id)
            funnel = con.execute(
                "select stage, rows_in from funnel where run_id = ? order by stage_order", [run_id]
            ).fetchall()
            assert funnel and funnel[0] == ("read", 6)
            assert (
                con.execute("select count(*) from attempts").fetchone()[0]
                == pq.read_table(out / "attempts.parquet").num_rows
                == 24
            )
        finally:
            con.close()
    finally:
        server.close()


@pytest.fixture(scope="module")
def run_folder(sample_dir, tmp_path_factory):
    """A finished `run` in a folder whose path has an apostrophe and a space."""
    out = tmp_path_factory.mktemp("paths") / "bob's runs" / "out 1"
    figures = run([str(sample_dir)], str(out), RunConfig(), None, [], backend_factory=scripted_backend)
    return out, figures


def test_an_apostrophe_and_a_space_in_out(run_folder):
    out, figures = run_folder
    assert figures["learnable"] > 0
    con = duckdb.connect(str(out / "curation.duckdb"), read_only=True)
    try:
        rid = figures["run_id"]
        assert con.execute("select count(*) from tasks where run_id = ?", [rid]).fetchone()[0] == figures["rows_in"]
        assert (
            con.execute("select count(*) from attempts where run_id = ?", [rid]).fetchone()[0]
            == figures["attempts"]
            > 0
        )
    finally:
        con.close()
    assert (out / "attempt_cache" / "_finished").is_dir()  # the cache under the same path settled too
    report = subprocess.run([*TASKSIEVE, "report", str(out)], capture_output=True, text=True, env=ENV, timeout=300)
    assert report.returncode == 0, report.stderr
    assert (out / "report.html").is_file()


@pytest.mark.slow
def test_dedup_into_a_run_folder_leaves_the_runs_training_set_and_attempts(run_folder, sample_dir):
    out, figures = run_folder
    before = {name: _digest(out / name) for name in ("learnable.parquet", "attempts.parquet")}
    proc = subprocess.run(
        [*TASKSIEVE, "dedup", "--input", str(sample_dir), "--out", str(out)],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "learnable.parquet and attempts.parquet of an earlier run; they are left as they are" in proc.stderr
    assert {name: _digest(out / name) for name in before} == before
    assert pq.read_table(out / "learnable.parquet").num_rows == figures["learnable"]
    con = duckdb.connect(str(out / "curation.duckdb"), read_only=True)
    try:
        modes = dict(con.execute("select sampling_mode, count(*) from runs group by all").fetchall())
        assert modes == {"sequential": 1, "dedup-only": 1}
        # The dedup run added no attempts, and the run's were not loaded twice.
        assert con.execute("select count(*) from attempts").fetchone()[0] == figures["attempts"]
    finally:
        con.close()
    report = subprocess.run([*TASKSIEVE, "report", str(out)], capture_output=True, text=True, env=ENV, timeout=300)
    assert report.returncode == 0, report.stderr  # the latest run is the dedup run


@pytest.mark.slow
def test_report_on_a_dedup_folder(sample_dir, tmp_path):
    out = tmp_path / "dedup"
    proc = subprocess.run(
        [*TASKSIEVE, "dedup", "--input", str(sample_dir), "--out", str(out)],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not (out / "learnable.parquet").exists() and not (out / "attempts.parquet").exists()
    report = subprocess.run([*TASKSIEVE, "report", str(out)], capture_output=True, text=True, env=ENV, timeout=300)
    assert report.returncode == 0, report.stderr
    html = (out / "report.html").read_text()
    assert 'data-label="kept"' in html  # the kept tasks, which have no drop stage, are labelled


@pytest.mark.parametrize(
    "planted", ["symlink to a file", "dangling symlink", "symlink to a folder", "hard link", "fifo"]
)
def test_a_planted_lock_file_is_replaced_never_written_through(tmp_path, planted):
    """OUT/.tasksieve.lock planted as a link (or a second name of another
    file, or a FIFO) is replaced by a fresh file of tasksieve's: the target
    is neither truncated nor written, and the lock still excludes."""
    out, target = tmp_path / "out", tmp_path / "target"
    out.mkdir()
    lock = out / ".tasksieve.lock"
    if planted == "symlink to a folder":
        target.mkdir()
        (target / "kept").write_text("precious")
    elif planted != "dangling symlink":
        target.write_text("precious\n")
    if planted == "hard link":
        os.link(target, lock)
    elif planted == "fifo":
        os.mkfifo(lock)
    else:
        lock.symlink_to(target)
    with hold_output(out, "run"):
        with pytest.raises(RunError, match="is in use by tasksieve run"):
            with hold_output(out, "select"):
                pass
        assert lock.is_file() and not lock.is_symlink() and os.stat(lock).st_nlink == 1
    if planted == "dangling symlink":
        assert not os.path.lexists(target)
    elif planted == "symlink to a folder":
        assert [p.name for p in target.iterdir()] == ["kept"] and (target / "kept").read_text() == "precious"
    else:
        assert target.read_text() == "precious\n"
