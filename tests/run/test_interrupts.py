"""Ctrl-C and servers that answer nonsense, as a user meets them: the
command line against a small OpenAI-compatible server (fake_openai.py).

- Ctrl-C mid-sampling: exit 130, one line saying what was saved and that
  the same command resumes, no traceback; the same command then re-uses
  every saved attempt and asks the server only for the rest.
- A server answering 200 with `choices: []` or an HTML page: retried with
  backoff like a 5xx, then the run stops (exit 4) with one STOPPED line and
  no Beam traceback before it."""

import os
import re
import signal
import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest

from fake_openai import FakeOpenAI, run_config, write_tasks
from tasksieve.schemas.config import RunConfig
from tasksieve.transforms.backends import openai as backend_openai
from tasksieve.transforms.backends.openai import OpenAIBackend
from tasksieve.transforms.backends.base import BackendUnavailable, GenRequest

TASKSIEVE = [sys.executable, "-m", "tasksieve.pipeline.cli"]
ENV = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")


def _tasksieve_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("tasksieve:")]


def _lines(cache) -> int:
    return sum(len(f.read_bytes().splitlines()) for f in cache.glob("*.jsonl"))


def _wait_for(condition, proc, limit_s: float = 240) -> None:
    """Poll until `condition` holds (a wait with a deadline, not a timing check)."""
    deadline = time.monotonic() + limit_s
    while not condition():
        assert proc.poll() is None, "the command ended before the test could interrupt it"
        assert time.monotonic() < deadline, "gave up waiting"
        time.sleep(0.05)


def _as_from_a_terminal() -> None:
    """Ctrl-C as a user at a terminal sends it. A test suite started as a
    background job (`cmd &` in a script) inherits SIGINT ignored, and so
    would the command: Python then never raises KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.slow
def test_ctrl_c_exits_130_with_one_line_and_the_same_command_resumes(tmp_path):
    server = FakeOpenAI(gated=True)
    try:
        tasks = write_tasks(tmp_path / "tasks.jsonl", 8)
        cfg = run_config(tmp_path / "run.toml", server.url, k=4, concurrency=2)
        out = tmp_path / "out"
        cmd = [*TASKSIEVE, "run", "--input", tasks, "--out", str(out), "--config", cfg]
        first = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, preexec_fn=_as_from_a_terminal
        )
        # Let six attempts through, then press Ctrl-C while the next ones wait at the server.
        server.allow(6)
        cache = out / "attempt_cache"
        _wait_for(lambda: cache.is_dir() and _lines(cache) >= 6 and server.hits >= 8, first)
        first.send_signal(signal.SIGINT)
        _, err = first.communicate(timeout=120)
        assert first.returncode == 130, err[-3000:]
        assert "Traceback" not in err and "ERROR" not in err, err[-3000:]
        (line,) = _tasksieve_lines(err)
        m = re.fullmatch(
            r"tasksieve: interrupted: the (\d+) attempts this run finished are saved in (.+); start the "
            r"same command again to resume \(they are re-used, none is paid for twice\)",
            line,
        )
        assert m and m.group(2) == str(cache), line
        saved = int(m.group(1))
        assert saved == _lines(cache) == 6
        assert not (out / "results.parquet").exists()  # nothing half-finished was written

        server.open_gate()
        hits_before = server.hits
        second = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=600)
        assert second.returncode == 0, second.stderr[-3000:]
        attempts = pq.read_table(out / "attempts.parquet").to_pylist()
        assert len(attempts) == 32
        assert sum(a["reused_from_run"] is not None for a in attempts) == saved
        assert server.hits - hits_before == 32 - saved  # only the missing attempts were asked for
    finally:
        server.close()


# --- malformed 200 responses ----------------------------------------------------------------------


def _backend(url, **openai):
    cfg = RunConfig.model_validate(
        {"model": {"backend": "openai", "openai": {"base_url": url, **openai}}, "sampling": {"max_tokens": 24}}
    )
    return OpenAIBackend(cfg.model.openai, "fake@test", cfg.sampling)


@pytest.fixture
def quick_backoff(monkeypatch):
    monkeypatch.setattr(backend_openai, "INITIAL_BACKOFF_S", 0.01)


@pytest.mark.parametrize("mode,why", [("empty", "an empty 'choices' list"), ("html", "not JSON: '<html><body>502")])
def test_a_malformed_200_is_retried_then_stops_the_run(quick_backoff, mode, why):
    server = FakeOpenAI(mode=mode)
    try:
        with pytest.raises(BackendUnavailable, match="answered nonsense after 2 retries") as e:
            _backend(server.url, max_retries=2, concurrency=1).generate([GenRequest((("user", "2+3"),), seed=2)])
        assert why in str(e.value)
        assert server.hits == 3  # the first try and two retries
    finally:
        server.close()


def test_a_malformed_200_then_a_good_answer_is_an_ordinary_attempt(quick_backoff):
    server = FakeOpenAI(mode="empty")
    try:
        backend = _backend(server.url, max_retries=3, concurrency=1)
        server_modes = iter(["empty", "ok"])

        def next_mode(*_):
            server.mode = next(server_modes, "ok")

        orig = server.permits.acquire
        server.permits.acquire = lambda timeout=None: (next_mode(), orig(timeout=timeout))[1]
        out = backend.generate([GenRequest((("user", "What is 2 plus 3?"),), seed=2)])
        assert out[0].completion == "\\boxed{5}" and out[0].error is None and out[0].prompt_tokens == 11
        assert server.hits == 2
    finally:
        server.close()


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["empty", "html"])
def test_a_server_answering_nonsense_stops_the_cli_with_exit_4_and_one_line(tmp_path, mode):
    server = FakeOpenAI(mode=mode)
    try:
        tasks = write_tasks(tmp_path / "tasks.jsonl", 3)
        cfg = run_config(tmp_path / "run.toml", server.url, k=2, concurrency=1, max_retries=1)
        proc = subprocess.run(
            [*TASKSIEVE, "run", "--input", tasks, "--out", str(tmp_path / "out"), "--config", cfg],
            capture_output=True,
            text=True,
            env=ENV,
            timeout=600,
        )
        assert proc.returncode == 4, proc.stderr[-3000:]
        assert "Traceback" not in proc.stderr and "ERROR" not in proc.stderr, proc.stderr[-3000:]
        (line,) = _tasksieve_lines(proc.stderr)
        assert line.startswith("tasksieve: STOPPED: the model backend stopped answering: ")
        assert "answered nonsense after 1 retries" in line and "start the same command again" in line
        assert "[while running" not in line
        # Each request tried twice (once and one retry); the run stopped before asking for all 6.
        assert server.hits % 2 == 0 and 2 <= server.hits < 12
    finally:
        server.close()
