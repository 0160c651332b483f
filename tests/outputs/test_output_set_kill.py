"""A command killed at any write of its outputs leaves the previous output
set current and whole; readers never see a mix of two runs (issue 50.1).

Each of `run`, `dedup` and `select` runs on a folder holding a finished
run, stopped (SIGSTOP) at every write step of its output set: at each stop
the folder is what a kill at that instant would leave, and the files under
their user-facing names plus the database must be the old run's or the
new one's, whole. Then real kills (SIGKILL) at the step the issue names
(after the Parquet files, at the database's commit) and at the last one,
and the next command into the folder."""

import os
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from fake_openai import FakeOpenAI, run_config, write_tasks
from output_state import classify, copy_folder, digests, step_through, steps, unfinished

TASKSIEVE = [sys.executable, "-m", "tasksieve.pipeline.cli"]
ENV = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A finished run (8 tasks) in `base`, the server, and a second delivery (5 tasks)."""
    root = tmp_path_factory.mktemp("kill")
    server = FakeOpenAI()
    cfg = run_config(root / "run.toml", server.url, k=4)
    with open(cfg, "a") as fh:
        fh.write("[select]\ndiversity = false\n")
    first, second = write_tasks(root / "first.jsonl", 8), write_tasks(root / "second.jsonl", 5)
    base = root / "base"
    proc = subprocess.run(
        [*TASKSIEVE, "run", "--input", first, "--out", str(base), "--config", cfg],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    yield {"root": root, "cfg": cfg, "second": second, "base": base}
    server.close()


def _command(name: str, w: dict, out) -> list[str]:
    if name == "run":
        return [*TASKSIEVE, "run", "--input", w["second"], "--out", str(out), "--config", w["cfg"]]
    if name == "dedup":
        return [*TASKSIEVE, "dedup", "--input", w["second"], "--out", str(out)]
    return [*TASKSIEVE, "select", str(out), "--budget-tasks", "2", "--config", w["cfg"]]


@pytest.mark.parametrize("command", ["run", "dedup", "select"])
def test_stopped_at_every_write_step_the_folder_shows_one_whole_set(world, command, tmp_path):
    out = copy_folder(world["base"], tmp_path / "out")
    old = digests(out)
    seen = []

    def look(n):
        seen.append(classify(out, old, command))

    code = step_through(_command(command, world, out), ENV, tmp_path, look)
    assert code == 0, (tmp_path / "stderr").read_text()[-3000:]
    names = steps(tmp_path)
    assert len(seen) == len(names) >= 10, names
    # Old until the one step that swaps `current`, new from then on.
    swap = names.index("link current") + 1  # the stop at step n is before that step's write
    assert seen[:swap] == ["old"] * swap, list(zip(names, seen))
    assert set(seen[swap:]) <= {"new"}, list(zip(names, seen))
    assert classify(out, old, command) == "new"
    assert not unfinished(out)


@pytest.mark.parametrize("command", ["run", "dedup", "select"])
def test_a_kill_after_the_files_and_at_the_database_commit_leaves_the_old_run(world, command, tmp_path):
    """The issue's kill: after the new Parquet files were written, before
    the database's commit. The old run stays current, whole; the killed
    set is marked unfinished; the next command removes it and commits."""
    log = tmp_path / "log"
    log.mkdir()
    probe = copy_folder(world["base"], tmp_path / "probe")
    assert step_through(_command(command, world, probe), ENV, log, lambda n: None) == 0
    at = steps(log).index("commit curation.duckdb") + 1
    assert any(s.startswith("replace ") for s in steps(log)[:at])  # files were written before it

    out = copy_folder(world["base"], tmp_path / "out")
    old = digests(out)
    killed = subprocess.run(
        _command(command, world, out),
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(ENV, TASKSIEVE_KILL_AT_STEP=str(at)),
    )
    assert killed.returncode == -9, killed.stderr[-3000:]
    assert classify(out, old, command) == "old" and digests(out) == old
    assert len(unfinished(out)) == 1
    report = subprocess.run([*TASKSIEVE, "report", str(out)], capture_output=True, text=True, env=ENV, timeout=300)
    assert report.returncode == 0, report.stderr
    old_run = pq.read_table(out / "results.parquet").column("run_id")[0].as_py()
    assert f"run {old_run}" in report.stdout

    again = subprocess.run(_command(command, world, out), capture_output=True, text=True, env=ENV, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert classify(out, old, command) == "new"
    assert not unfinished(out)


def test_killed_at_every_step_of_a_dedup_the_next_reader_sees_one_set(world, tmp_path):
    """Real SIGKILLs, one at each write step of `dedup` (the cheapest
    command): each folder it leaves shows one whole set."""
    log = tmp_path / "log"
    log.mkdir()
    probe = copy_folder(world["base"], tmp_path / "probe")
    assert step_through(_command("dedup", world, probe), ENV, log, lambda n: None) == 0
    n_steps = len(steps(log))
    old = digests(world["base"])
    outcomes = []
    for at in range(1, n_steps + 1):
        out = copy_folder(world["base"], tmp_path / f"out{at}")
        killed = subprocess.run(
            _command("dedup", world, out),
            capture_output=True,
            text=True,
            timeout=600,
            env=dict(ENV, TASKSIEVE_KILL_AT_STEP=str(at)),
        )
        assert killed.returncode == -9, (at, killed.stderr[-2000:])
        outcomes.append(classify(out, old, "dedup"))
    swap = steps(log).index("link current") + 1
    # A kill at step n lands before that step's write: old up to the swap of `current`, new after it.
    assert outcomes == ["old"] * swap + ["new"] * (n_steps - swap), list(zip(steps(log), outcomes))
