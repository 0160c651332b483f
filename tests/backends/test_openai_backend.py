"""The `openai` backend: against a real `vllm` OpenAI server started on the
CPU by the test (including a server killed mid-run and the run resumed),
and against a tiny scripted HTTP server for the faults a real one cannot be
made to show on demand (429, 5xx, 400)."""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tasksieve.schemas.config import RunConfig
from tasksieve.transforms.backends.openai import OpenAIBackend
from tasksieve.transforms.backends.base import REQUEST_FAILED, BackendUnavailable, GenRequest

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cfg(url, **openai):
    return RunConfig.model_validate(
        {"model": {"backend": "openai", "openai": {"base_url": url, **openai}}, "sampling": {"max_tokens": 24}}
    )


# --- a real vLLM server ------------------------------------------------------


class VllmServer:
    def __init__(self, log: Path):
        from tasksieve.pipeline.setup.models import ensure_default_model

        self.model = str(ensure_default_model())
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.log = log
        self.proc = None

    def start(self):
        env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1", HF_HUB_OFFLINE="1", VLLM_NO_USAGE_STATS="1")
        with open(self.log, "a") as fh:
            self.proc = subprocess.Popen(
                [
                    PY,
                    "-m",
                    "vllm.entrypoints.openai.api_server",
                    "--model",
                    self.model,
                    "--served-model-name",
                    "smollm",
                    "--dtype",
                    "float32",
                    "--max-model-len",
                    "1024",
                    "--enforce-eager",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                ],
                stdout=fh,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        deadline = time.time() + 300
        while time.time() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"vllm server exited {self.proc.returncode}:\n{self.log.read_text()[-3000:]}")
            try:
                urllib.request.urlopen(self.url + "/models", timeout=2).read()
                return
            except OSError:
                time.sleep(1)
        pytest.fail(f"vllm server did not start in 300 s:\n{self.log.read_text()[-3000:]}")

    def requests_served(self) -> int:
        return self.log.read_text().count('POST /v1/chat/completions HTTP/1.1" 200')

    def kill(self):
        # The whole process group: the API server and its engine-core child.
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = VllmServer(tmp_path_factory.mktemp("vllm") / "server.log")
    srv.start()
    yield srv
    if srv.proc.poll() is None:
        srv.kill()


@pytest.mark.slow
def test_real_server_gives_completions_tokens_and_distinct_samples_per_seed(server):
    backend = OpenAIBackend(_cfg(server.url, concurrency=4).model.openai, "smollm@test", _cfg(server.url).sampling)
    assert backend.model == "smollm"  # the only model the server lists
    reqs = [GenRequest(messages=(("user", "Name a colour."),), seed=s) for s in range(6)]
    finished = []
    out = backend.generate(reqs, on_result=lambda i, r: finished.append(i))
    assert sorted(finished) == list(range(6))  # each reported as it finished
    assert all(
        r.prompt_tokens > 0 and 0 < r.completion_tokens <= 24 and r.finish_reason in ("stop", "length") for r in out
    )
    assert len({r.completion for r in out}) > 1
    again = backend.generate(reqs[:1])
    assert again[0].completion == out[0].completion  # same seed, same sample


def _write_tasks(path: Path, n: int):
    with open(path, "w") as fh:
        for i in range(n):
            fh.write(
                json.dumps(
                    {
                        "task_id": f"t{i}",
                        "source": "v",
                        "domain": "math",
                        "prompt": f"What is {i + 2} plus {i + 5}?",
                        "answer": str(2 * i + 7),
                    }
                )
                + "\n"
            )


@pytest.mark.slow
def test_server_killed_mid_run_then_the_same_command_resumes_paying_for_nothing_twice(server, tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    _write_tasks(tasks, 8)
    cfg = tmp_path / "run.toml"
    cfg.write_text(
        f'[model]\nbackend = "openai"\nmodel_id = "smollm@test"\n[model.openai]\nbase_url = "{server.url}"\n'
        'concurrency = 2\nmax_retries = 1\ntimeout_s = 60\n[sampling]\nmode = "fixed"\nk = 4\nmax_tokens = 24\n'
    )
    out = tmp_path / "out"
    cmd = [PY, "-m", "tasksieve.pipeline.cli", "run", "--input", str(tasks), "--out", str(out), "--config", str(cfg)]
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")

    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    cache = out / "attempt_cache"
    deadline = time.time() + 240
    while time.time() < deadline:
        done = sum(len(f.read_text().splitlines()) for f in cache.glob("*.jsonl")) if cache.exists() else 0
        if done >= 6:
            break
        time.sleep(0.2)
    server.kill()
    _, err = first.communicate(timeout=300)
    assert first.returncode == 4, err
    assert "stopped answering" in err and "same command" in err
    saved = sum(len(f.read_text().splitlines()) for f in cache.glob("*.jsonl"))
    assert 6 <= saved < 32

    server.start()
    served_before = server.requests_served()
    second = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert second.returncode == 0, second.stderr
    assert "row accounting" in second.stdout and "OK" in second.stdout
    attempts = pq.read_table(out / "attempts.parquet").to_pylist()
    assert len(attempts) == 32
    reused = [a for a in attempts if a["reused_from_run"]]
    assert len(reused) == saved  # every attempt finished before the kill was re-used
    # ...and the server was asked only for the rest: nothing generated twice.
    assert server.requests_served() - served_before == 32 - saved
    assert len({(a["content_hash"], a["attempt_idx"]) for a in attempts}) == 32


# --- scripted faults -----------------------------------------------------------


class _Script(BaseHTTPRequestHandler):
    """Answers chat completions from a queue of status codes; 200 = a reply."""

    statuses: list = []
    hits = 0

    def log_message(self, *a):
        pass

    def do_GET(self):
        self._send(200, {"object": "list", "data": [{"id": "m", "object": "model"}]})

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        type(self).hits += 1
        status = self.statuses.pop(0) if self.statuses else 200
        if status == "hang":
            time.sleep(3)  # longer than the client's timeout
            return
        if status == 200:
            self._send(
                200,
                {
                    "id": "x",
                    "object": "chat.completion",
                    "created": 0,
                    "model": "m",
                    "choices": [
                        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "\\boxed{5}"}}
                    ],
                    "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14},
                },
            )
        else:
            self._send(status, {"error": {"message": f"scripted {status}"}}, retry_after=status == 429)

    def _send(self, status, body, retry_after=False):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if retry_after:
            self.send_header("Retry-After", "0")
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def scripted():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Script)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    _Script.hits = 0
    yield _Script, f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()


def _backend(url, **kw):
    cfg = _cfg(url, **kw)
    return OpenAIBackend(cfg.model.openai, "m@test", cfg.sampling)


@pytest.mark.slow
def test_rate_limits_and_server_errors_are_retried_with_backoff(scripted):
    script, url = scripted
    script.statuses = [429, 503, 500]
    out = _backend(url, max_retries=3, concurrency=1).generate([GenRequest((("user", "2+3"),), seed=1)])
    assert out[0].completion == "\\boxed{5}" and out[0].prompt_tokens == 11 and out[0].completion_tokens == 3
    assert script.hits == 4


def test_a_server_that_keeps_failing_raises_backend_unavailable(scripted):
    script, url = scripted
    script.statuses = [503] * 10
    with pytest.raises(BackendUnavailable, match="after 2 retries"):
        _backend(url, max_retries=2).generate([GenRequest((("user", "2+3"),), seed=1)])
    assert script.hits == 3


def test_a_hanging_server_times_out_is_retried_then_stops_the_run(scripted):
    script, url = scripted
    script.statuses = ["hang", "hang"]
    with pytest.raises(BackendUnavailable, match="deadline"):
        _backend(url, max_retries=1, timeout_s=0.5).generate([GenRequest((("user", "2+3"),), seed=1)])
    assert script.hits == 2


def test_a_rejected_request_is_a_failed_request_not_an_attempt_nor_a_dead_run(scripted):
    script, url = scripted
    script.statuses = [400]
    out = _backend(url, concurrency=1).generate(
        [GenRequest((("user", "x"),), seed=1), GenRequest((("user", "y"),), seed=2)]
    )
    assert out[0].error.startswith("HTTP 400") and out[0].completion == ""
    assert out[0].finish_reason == REQUEST_FAILED  # never verified, classified or cached
    assert out[1].error is None and out[1].completion == "\\boxed{5}"


def test_an_unreachable_server_fails_before_the_run_starts(tmp_path):
    from tasksieve.pipeline.run.errors import RunError
    from tasksieve.pipeline.run.command import run

    _write_tasks(tmp_path / "t.jsonl", 1)
    with pytest.raises(RunError, match="not answering"):
        run([str(tmp_path / "t.jsonl")], str(tmp_path / "out"), _cfg(f"http://127.0.0.1:{_free_port()}/v1"), None, [])
