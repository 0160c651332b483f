"""A full disk or quota (issue 50.3), injected where it can strike: a
Parquet output, DuckDB's commit, a Beam worker's staged shard, the attempt
cache in the middle of sampling, `select` and `report`. Each gives exit 6
and one line naming the folder and its free space, no traceback; the
previous outputs stay current and whole, nothing unfinished is left, and
the attempts paid for before the disk filled stay in the attempt cache."""

import errno
import os
import shutil
import subprocess
import sys

import pytest

from fake_openai import FakeOpenAI, run_config, write_tasks
from output_state import digests, unfinished

TASKSIEVE = [sys.executable, "-m", "tasksieve.pipeline.cli"]
ENV = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")

pytestmark = pytest.mark.slow

# Runs the command line with one function replaced by a full disk.
WRAPPER = r"""
import errno, os, sys, importlib
module, attr, code, after = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
m = importlib.import_module(module)
owner, _, name = attr.rpartition(".")
holder = getattr(m, owner) if owner else m
real = getattr(holder, name)
calls = [0]

def full(*args, **kw):
    calls[0] += 1
    if calls[0] <= after:
        return real(*args, **kw)
    where = next((str(a) for a in args if isinstance(a, (str, os.PathLike)) and "/" in str(a)), None)
    if where is None and args and hasattr(args[0], "path"):
        where = str(args[0].path)
    if module.endswith("outputs") and name == "transaction":
        import duckdb
        raise duckdb.IOException(f'IO Error: Could not write file "{where}": {os.strerror(code)}')
    raise OSError(code, os.strerror(code), where)

setattr(holder, name, full)
from tasksieve.pipeline.cli import main
sys.exit(main(sys.argv[5:]))
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("full")
    server = FakeOpenAI()
    cfg = run_config(root / "run.toml", server.url, k=4, concurrency=1)
    with open(cfg, "a") as fh:
        fh.write("[select]\ndiversity = false\n")
    tasks = write_tasks(root / "tasks.jsonl", 6)
    base = root / "base"
    proc = subprocess.run(
        [*TASKSIEVE, "run", "--input", tasks, "--out", str(base), "--config", cfg],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (root / "wrapper.py").write_text(WRAPPER)
    yield {"root": root, "cfg": cfg, "tasks": tasks, "base": base, "more": write_tasks(root / "more.jsonl", 7)}
    server.close()


def _full(world, out, module, attr, args, code=errno.ENOSPC, after=0):
    return subprocess.run(
        [sys.executable, str(world["root"] / "wrapper.py"), module, attr, str(code), str(after), *args],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=900,
    )


def _check_one_line(proc, folder) -> str:
    assert proc.returncode == 6, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("tasksieve:")]
    assert len(lines) == 1, proc.stderr[-3000:]
    line = lines[0]
    assert line.startswith("tasksieve: error: no space left on device (or disk quota exceeded) writing to ")
    assert str(folder) in line and " free)" in line, line
    assert "start the same command again" in line
    return line


CASES = [
    ("a Parquet output", "tasksieve.pipeline.outputs.finalize", "write_atomic", "dedup", errno.ENOSPC),
    ("the database commit", "tasksieve.pipeline.outputs.finalize", "transaction", "dedup", errno.ENOSPC),
    ("a staged shard in a Beam worker", "tasksieve.pipeline.outputs.staging", "_write_ipc", "dedup", errno.EDQUOT),
    ("a Parquet output of run", "tasksieve.pipeline.outputs.finalize", "write_atomic", "run", errno.EDQUOT),
    ("the selection", "tasksieve.pipeline.select.write", "write_parquet_atomic", "select", errno.ENOSPC),
    ("the report", "tasksieve.pipeline.report.command", "write_text_atomic", "report", errno.ENOSPC),
]


@pytest.mark.parametrize("case,module,attr,command,code", CASES, ids=[c[0] for c in CASES])
def test_a_full_disk_is_one_line_and_the_old_outputs_stay(world, tmp_path, case, module, attr, command, code):
    out = shutil.copytree(world["base"], tmp_path / "out", symlinks=True)
    old = digests(out)
    args = {
        "dedup": ["dedup", "--input", world["more"], "--out", str(out)],
        "run": ["run", "--input", world["more"], "--out", str(out), "--config", world["cfg"]],
        "select": ["select", str(out), "--budget-tasks", "2", "--config", world["cfg"]],
        "report": ["report", str(out)],
    }[command]
    proc = _full(world, out, module, attr, args, code)
    _check_one_line(proc, out)
    assert digests(out) == old
    assert not unfinished(out)


def test_a_full_attempt_cache_keeps_the_attempts_paid_for(world, tmp_path):
    out = shutil.copytree(world["base"], tmp_path / "out", symlinks=True)
    old = digests(out)
    cache = tmp_path / "cache"
    args = ["run", "--input", world["more"], "--out", str(out), "--config", world["cfg"], "--attempt-cache", str(cache)]
    proc = _full(world, out, "tasksieve.transforms.sample.attempt_cache", "CacheWriter.write", args, after=5)
    line = _check_one_line(proc, cache)
    assert f"the attempts already saved stay in {cache}" in line
    saved = sum(len(f.read_text().splitlines()) for f in cache.glob("*.jsonl"))
    assert saved == 5
    assert digests(out) == old and not unfinished(out)
    # The same command, with space again, pays only for the rest.
    again = subprocess.run([*TASKSIEVE, *args], capture_output=True, text=True, env=ENV, timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "5 re-used from the attempt cache" in again.stdout
