"""A broken server never becomes a verdict: whole `tasksieve run` commands
with the `openai` backend against the fake server (fake_openai.py), on a
small delivery, without the real engine.

- every request answered 401 (or 404): exit 5, one line with a hint, no
  attempt in the cache; the same command against a healthy server then
  gives the results of a clean run;
- every request rejected (400): the failed share is over
  model.max_failed_share: exit 5, no output written;
- one completion with a lone surrogate: that task alone is dropped
  (`generation_failed`), nothing of it cached, the rest of the wave saved."""

import json
import os
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from fake_openai import FakeOpenAI, run_config, write_tasks

TASKSIEVE = [sys.executable, "-m", "tasksieve.pipeline.cli"]
ENV = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")

pytestmark = pytest.mark.slow


def _run(tasks, out, cfg):
    return subprocess.run(
        [*TASKSIEVE, "run", "--input", tasks, "--out", str(out), "--config", cfg],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=600,
    )


def _tasksieve_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("tasksieve:") and "warning" not in ln]


def _cached_entries(cache) -> int:
    if not cache.exists():
        return 0
    lines = sum(len(f.read_bytes().splitlines()) for f in cache.glob("*.jsonl"))
    return lines + sum(pq.read_metadata(f).num_rows for f in cache.glob("*.parquet"))


def _results(out):
    return sorted(
        (r["task_id"], r["status"], r.get("pass_rate")) for r in pq.read_table(out / "results.parquet").to_pylist()
    )


def _attempts(out):
    return sorted(
        (a["content_hash"], a["attempt_idx"], a["completion"], a["passed"])
        for a in pq.read_table(out / "attempts.parquet").to_pylist()
    )


@pytest.mark.parametrize("code,hint", [(401, "API key"), (404, "model name")])
def test_a_refusing_server_stops_the_run_caches_nothing_and_a_healthy_one_then_matches_a_clean_run(
    tmp_path, code, hint
):
    server = FakeOpenAI(mode=f"status:{code}")
    try:
        tasks = write_tasks(tmp_path / "tasks.jsonl", 4)
        cfg = run_config(tmp_path / "run.toml", server.url, k=4, concurrency=2, max_retries=2, model="m")
        out = tmp_path / "out"
        proc = _run(tasks, out, cfg)
        assert proc.returncode == 5, proc.stderr[-3000:]
        assert "Traceback" not in proc.stderr and "ERROR" not in proc.stderr, proc.stderr[-3000:]
        (line,) = _tasksieve_lines(proc.stderr)
        assert line.startswith("tasksieve: REFUSED: ") and f"HTTP {code}" in line and hint in line
        assert _cached_entries(out / "attempt_cache") == 0
        assert not (out / "results.parquet").exists()
        assert server.hits <= 4  # stopped at once, not retried through the pool

        server.mode = "ok"
        again = _run(tasks, out, cfg)
        assert again.returncode == 0, again.stderr[-3000:]
        clean = tmp_path / "clean"
        fresh = _run(tasks, clean, cfg)
        assert fresh.returncode == 0, fresh.stderr[-3000:]
        assert _results(out) == _results(clean)
        assert _attempts(out) == _attempts(clean)
        assert "learnable" in {r[1] for r in _results(out)}  # right on even seeds only: not all all_fail
    finally:
        server.close()


def test_401_on_the_model_list_fails_before_the_run_in_one_line(tmp_path):
    server = FakeOpenAI(mode="status:401")
    server.models_mode = "status:401"
    try:
        tasks = write_tasks(tmp_path / "tasks.jsonl", 2)
        cfg = run_config(tmp_path / "run.toml", server.url, k=2)
        proc = _run(tasks, tmp_path / "out", cfg)
        assert proc.returncode == 1, proc.stderr[-3000:]
        (line,) = _tasksieve_lines(proc.stderr)
        assert "HTTP 401" in line and "API key" in line and "Traceback" not in proc.stderr
        assert server.hits == 0
    finally:
        server.close()


def test_a_run_where_too_many_requests_fail_does_not_finish(tmp_path):
    server = FakeOpenAI(mode="status:400")
    try:
        tasks = write_tasks(tmp_path / "tasks.jsonl", 4)
        cfg = run_config(tmp_path / "run.toml", server.url, k=2, max_retries=2)
        out = tmp_path / "out"
        proc = _run(tasks, out, cfg)
        assert proc.returncode == 5, proc.stderr[-3000:]
        (line,) = _tasksieve_lines(proc.stderr)
        assert "8 of 8 requests to the model failed" in line and "HTTP 400" in line
        assert "max_failed_share" in line and "Traceback" not in proc.stderr
        assert server.hits == 8  # a rejected request is not retried
        assert not (out / "learnable.parquet").exists() and not (out / "results.parquet").exists()
        assert _cached_entries(out / "attempt_cache") == 0
    finally:
        server.close()


def test_a_surrogate_completion_drops_its_task_alone_and_the_rest_is_saved(tmp_path):
    server = FakeOpenAI()
    server.script = ["surrogate"]
    try:
        tasks = write_tasks(tmp_path / "tasks.jsonl", 4)
        cfg = run_config(tmp_path / "run.toml", server.url, k=2, concurrency=1, model_extra="max_failed_share = 0.5\n")
        out = tmp_path / "out"
        proc = _run(tasks, out, cfg)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "Traceback" not in proc.stderr
        results = pq.read_table(out / "results.parquet").to_pylist()
        failed = [r for r in results if r["status"] == "dropped"]
        assert len(failed) == 1 and failed[0]["drop_reason"] == "generation_failed"
        assert "surrogate" in json.loads(failed[0]["drop_detail"])["error"]
        assert sum(r["status"] in ("learnable", "all_pass", "all_fail") for r in results) == 3
        attempts = pq.read_table(out / "attempts.parquet").to_pylist()
        assert len(attempts) == 7  # 8 requests, one of them not an attempt
        assert _cached_entries(out / "attempt_cache") == 7
    finally:
        server.close()
