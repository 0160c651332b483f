"""Folders a command must not write into (issue 50.4) and two `select` at
once (50.5).

- `/`, system folders, the home folder, and links that resolve to them are
  refused as an output folder by every command that writes one: one line,
  exit 2, nothing written there.
- A non-empty --out holding no tasksieve run is refused unless --force.
- A second `select` into a folder a `select` holds refuses at once with one
  line; the first's selection is the one in selected.parquet."""

import os
import shutil
import signal
import subprocess
import sys

import duckdb
import pyarrow.parquet as pq
import pytest

from fake_openai import FakeOpenAI, run_config, write_tasks

TASKSIEVE = [sys.executable, "-m", "tasksieve.pipeline.cli"]
ENV = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")


def _cli(*args, env=None, timeout=600, writable=None):
    """The command line; with `writable`, inside a bubblewrap sandbox where
    only that folder can be written, so a regression that writes into `/`
    or a system folder fails there instead of writing it."""
    prefix = []
    if writable is not None and _sandbox_works(writable):
        prefix = [
            "bwrap",
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--bind",
            str(writable),
            str(writable),
            "--",
        ]
        env = dict(env or ENV, TMPDIR=str(writable))
    return subprocess.run([*prefix, *TASKSIEVE, *args], capture_output=True, text=True, env=env or ENV, timeout=timeout)


def _sandbox_works(folder) -> bool:
    if not shutil.which("bwrap"):
        return False
    probe = subprocess.run(
        [
            "bwrap",
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--bind",
            str(folder),
            str(folder),
            "--",
            "true",
        ],
        capture_output=True,
    )
    return probe.returncode == 0


def _one_line(proc) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tasksieve: error: "), proc.stderr[-3000:]
    return lines[0]


@pytest.fixture
def home(tmp_path):
    """A home folder of the test's own (refusing the real one is the same code)."""
    h = tmp_path / "home"
    h.mkdir()
    (h / ".profile").write_text("keep\n")
    return h


def _dangerous(tmp_path, home, every: bool):
    (tmp_path / "to_root").symlink_to("/")
    (tmp_path / "to_etc").symlink_to("/etc")
    (tmp_path / "to_home").symlink_to(home)
    few = ["/", str(home), str(tmp_path / "to_root"), "/proc"]
    return (
        few
        + [
            "/etc",
            "/usr",
            "/usr/bin",
            "/bin",
            "/var",
            "/boot",
            "/sys",
            "/dev",
            "/tmp",
            str(tmp_path / "to_etc"),
            str(tmp_path / "to_home"),
            "/usr/../etc/",
        ]
        if every
        else few
    )


@pytest.mark.slow
@pytest.mark.parametrize("command", ["dedup", "run", "validate", "sample-data", "report", "select"])
def test_system_and_home_folders_are_refused(tmp_path, home, command):
    """Every folder for `dedup`; `/`, the home folder, a link to `/` and
    /proc for the others (the same check, called by each)."""
    tasks = write_tasks(tmp_path / "tasks.jsonl", 2)
    env = dict(ENV, HOME=str(home))
    before = sorted(os.listdir("/"))
    for folder in _dangerous(tmp_path, home, command == "dedup"):
        args = {
            "run": ["run", "--input", tasks, "--out", folder, "--backend", "replay", "--replay", tasks],
            "dedup": ["dedup", "--input", tasks, "--out", folder],
            "validate": ["validate", tasks, "--out", folder, "--no-data-docs"],
            "sample-data": ["sample-data", folder],
            "report": ["report", folder],
            "select": ["select", folder, "--budget-tasks", "3"],
        }[command]
        proc = _cli(*args, env=env, writable=tmp_path)
        assert proc.returncode == 2, (folder, proc.returncode, proc.stderr[-2000:])
        line = _one_line(proc)
        assert "system folder" in line or "home folder" in line, line
    assert sorted(os.listdir("/")) == before
    assert sorted(os.listdir(home)) == [".profile"]


@pytest.mark.slow
def test_a_non_empty_folder_without_a_run_needs_force(tmp_path):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 3)
    data = tmp_path / "data"
    data.mkdir()
    (data / "thesis.tex").write_text("years of work\n")
    proc = _cli("dedup", "--input", tasks, "--out", str(data))
    assert proc.returncode == 2, proc.stderr[-2000:]
    line = _one_line(proc)
    assert "is not empty ('thesis.tex')" in line and "--force" in line
    assert os.listdir(data) == ["thesis.tex"]  # nothing written, not even the lock
    forced = _cli("dedup", "--input", tasks, "--out", str(data), "--force")
    assert forced.returncode == 0, forced.stderr[-2000:]
    assert (data / "thesis.tex").read_text() == "years of work\n"
    assert pq.read_table(data / "results.parquet").num_rows == 3
    again = _cli("dedup", "--input", tasks, "--out", str(data))  # it holds a run now
    assert again.returncode == 0, again.stderr[-2000:]


@pytest.mark.slow
def test_two_selects_at_once_the_second_refuses_and_the_first_is_whole(tmp_path):
    server = FakeOpenAI()
    try:
        cfg = run_config(tmp_path / "run.toml", server.url, k=4)
        with open(cfg, "a") as fh:
            fh.write("[select]\ndiversity = false\n")
        tasks = write_tasks(tmp_path / "tasks.jsonl", 8)
        out = tmp_path / "out"
        assert _cli("run", "--input", tasks, "--out", str(out), "--config", cfg).returncode == 0
    finally:
        server.close()
    select = [*TASKSIEVE, "select", str(out), "--budget-tasks", "2", "--config", cfg]
    # The first stops itself at its first write (holding the folder) until the second has been refused.
    first = subprocess.Popen(
        select, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(ENV, TASKSIEVE_STOP_AT_STEP="1")
    )
    try:
        _, status = os.waitpid(first.pid, os.WUNTRACED)
        assert os.WIFSTOPPED(status), "the first select ended before it wrote"
        second = _cli(*select[3:])
    finally:
        os.kill(first.pid, signal.SIGCONT)
    stdout, stderr = first.communicate(timeout=600)
    assert second.returncode == 1, second.stderr[-2000:]
    line = _one_line(second)
    assert f"output folder {out} is in use by tasksieve select (pid {first.pid}" in line
    assert first.returncode == 0, stderr[-2000:]
    con = duckdb.connect(str(out / "curation.duckdb"), read_only=True)
    try:
        sids = [r[0] for r in con.execute("select selection_id from selections").fetchall()]
    finally:
        con.close()
    assert len(sids) == 1 and f"(selection_id {sids[0]})" in stdout
    assert set(pq.read_table(out / "selected.parquet").column("selection_id").to_pylist()) == {sids[0]}
