"""What a reader of an output folder sees, for the kill and fault tests:
the files under their user-facing names (OUT/results.parquet, ...) and the
database, classified as the previous command's output set or the new one,
each whole, or an assertion error that says what is mixed."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import threading
from pathlib import Path

import duckdb
import pyarrow.parquet as pq

SET_FILES = (
    "learnable.parquet",
    "results.parquet",
    "attempts.parquet",
    "quarantine.parquet",
    "costs.parquet",
    "selected.parquet",
    "curation.duckdb",
)


def digests(out: Path) -> dict:
    """name -> sha256 of what OUT/name shows (None: no file)."""
    return {n: hashlib.sha256((out / n).read_bytes()).hexdigest() if (out / n).exists() else None for n in SET_FILES}


def _db(out: Path, sql: str, params=()):
    con = duckdb.connect(str(out / "curation.duckdb"), read_only=True)
    try:
        return con.execute(sql, list(params)).fetchall()
    finally:
        con.close()


def _run_ids(out: Path, name: str) -> set:
    return set(pq.read_table(out / name, columns=["run_id"]).column("run_id").to_pylist())


def classify(out: Path, old: dict, command: str) -> str:
    """'old' if every visible file is the previous set's; 'new' if they are
    all the new command's, whole and agreeing with the database; else an
    AssertionError naming the mix."""
    now = digests(out)
    if now == old:
        return "old"
    runs = [r[0] for r in _db(out, "select run_id from runs order by started_at, run_id")]
    if command in ("run", "dedup"):
        latest = runs[-1]
        for name in ("results.parquet", "costs.parquet", "quarantine.parquet"):
            ids = _run_ids(out, name)
            assert ids <= {latest}, f"{name} holds runs {ids}, the database's latest is {latest}: a mix"
        n_tasks = _db(out, "select count(*) from tasks where run_id = ?", [latest])[0][0]
        assert pq.read_table(out / "results.parquet").num_rows == n_tasks > 0
        if command == "run":
            assert _run_ids(out, "attempts.parquet") <= {latest}
            n_learn = _db(out, "select count(*) from tasks where run_id = ? and status = 'learnable'", [latest])[0][0]
            assert pq.read_table(out / "learnable.parquet").num_rows == n_learn
            assert (
                pq.read_table(out / "attempts.parquet").num_rows
                == _db(out, "select count(*) from attempts where run_id = ?", [latest])[0][0]
            )
        else:  # dedup leaves a run's training set and attempts as they were
            for name in ("learnable.parquet", "attempts.parquet", "selected.parquet"):
                assert now[name] == old[name], f"dedup changed {name}"
    else:  # select
        sel = [r[0] for r in _db(out, "select selection_id from selections order by created_at, selection_id")]
        shown = set(pq.read_table(out / "selected.parquet", columns=["selection_id"]).column(0).to_pylist())
        assert shown == {sel[-1]}, f"selected.parquet is selection {shown}, the database's latest is {sel[-1]}"
        for name in SET_FILES:
            if name not in ("selected.parquet", "curation.duckdb"):
                assert now[name] == old[name], f"select changed {name}"
    return "new"


def unfinished(out: Path) -> list[str]:
    runs = out / "runs"
    return sorted(p.name for p in runs.iterdir() if p.name.endswith(".unfinished")) if runs.is_dir() else []


def copy_folder(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, symlinks=True)
    return dst


def step_through(cmd: list[str], env: dict, log_dir: Path, on_stop, limit_s: float = 600) -> int:
    """Run `cmd` stopped (SIGSTOP) at every write step of its output set;
    `on_stop(n)` looks at the folder while it is stopped (what a kill at
    that instant would leave), then the command goes on. Returns its exit code."""
    env = dict(env, TASKSIEVE_STOP_AT_STEP="all", TASKSIEVE_STEP_LOG=str(log_dir / "steps.log"))
    with open(log_dir / "stdout", "w") as so, open(log_dir / "stderr", "w") as se:
        proc = subprocess.Popen(cmd, env=env, stdout=so, stderr=se)
    watchdog = threading.Timer(limit_s, lambda: os.kill(proc.pid, signal.SIGKILL))
    watchdog.start()
    try:
        stops = 0
        while True:
            _, status = os.waitpid(proc.pid, os.WUNTRACED)
            if os.WIFSTOPPED(status):
                stops += 1
                try:
                    on_stop(stops)
                finally:
                    os.kill(proc.pid, signal.SIGCONT)
                continue
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode
    finally:
        watchdog.cancel()


def steps(log_dir: Path) -> list[str]:
    return [ln.split(" ", 1)[1] for ln in (log_dir / "steps.log").read_text().splitlines()]
