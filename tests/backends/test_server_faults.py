"""Every way a model server can fail, against the `openai` backend and a
local fake server (fake_openai.py) on 127.0.0.1: each status code class,
each body fault (slow drip, a stop mid-body, a body that breaks off, a gzip
bomb, a lone surrogate, malformed or non-text JSON), the progress line of a
slow request, and the bounds on `-k`, `--base-url` and a wave's size.

An error is never an attempt: it is retried, stops the run, or fails that
one request (never verified, classified or cached)."""

import threading

import pytest

from fake_openai import FakeOpenAI
from tasksieve.schemas.config import RunConfig
from tasksieve.transforms.backends import openai as backend_openai
from tasksieve.transforms.backends.base import (
    REQUEST_FAILED,
    BackendUnavailable,
    GenRequest,
    ModelLoadError,
    ServerRefused,
)
from tasksieve.transforms.backends.openai import OpenAIBackend

REQ = GenRequest((("user", "What is 2 plus 3?"),), seed=2)


def _backend(url, **openai):
    cfg = RunConfig.model_validate(
        {"model": {"backend": "openai", "openai": {"base_url": url, **openai}}, "sampling": {"max_tokens": 24}}
    )
    return OpenAIBackend(cfg.model.openai, "fake@test", cfg.sampling)


def _bounded(fn, limit_s: float = 60):
    """fn() in a thread; the test fails (instead of hanging) if it does not
    return within limit_s. A guard against a hang, not a timing check."""
    box = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as e:  # re-raised in the test's thread
            box["error"] = e

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(limit_s)
    assert not t.is_alive(), f"still waiting after {limit_s} s: the request was never cut off"
    if "error" in box:
        raise box["error"]
    return box["value"]


@pytest.fixture
def server():
    srv = FakeOpenAI()
    yield srv
    srv.close()


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch):
    monkeypatch.setattr(backend_openai, "INITIAL_BACKOFF_S", 0.01)


# --- status codes --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "code,hint",
    [
        (401, "API key"),
        (403, "API key"),
        (407, "API key"),
        (404, "model name"),
        (405, "model name"),
        (410, "model name"),
        (301, "redirects"),
        (302, "redirects"),
        (402, "not one tasksieve retries"),
        (418, "not one tasksieve retries"),
        (451, "not one tasksieve retries"),
    ],
)
def test_a_status_no_retry_mends_stops_at_once_with_a_hint(server, code, hint):
    server.mode = f"status:{code}"
    with pytest.raises(ServerRefused) as e:
        _bounded(lambda: _backend(server.url, max_retries=3, concurrency=1).generate([REQ]))
    assert f"HTTP {code}" in str(e.value) and hint in str(e.value)
    assert server.hits == 1  # not retried
    assert "\n" not in str(e.value)


def test_a_refusal_holds_back_the_queued_requests_however_late_the_caller_wakes(server, monkeypatch):
    """The pool's threads take the next queued request the moment theirs
    is refused; on a busy machine generate() hears of the refusal late. The
    queued requests must not reach the server meanwhile (a CI run saw 6
    hits for 4 allowed under load). Here generate() wakes 0.3 s late."""
    real_wait = backend_openai.wait

    def late_wait(*a, **k):
        import time

        time.sleep(0.3)
        return real_wait(*a, **k)

    monkeypatch.setattr(backend_openai, "wait", late_wait)
    server.mode = "status:401"
    requests = [GenRequest((("user", f"What is {i} plus 3?"),), seed=i) for i in range(40)]
    with pytest.raises(ServerRefused):
        _bounded(lambda: _backend(server.url, max_retries=2, concurrency=2).generate(requests))
    assert server.hits <= 2  # the refused one and at most one already in flight beside it


@pytest.mark.parametrize("code", [408, 409, 425, 429, 500, 502, 503, 504, 529, 599])
def test_a_transient_status_is_retried_then_answers(server, code):
    server.script = [f"status:{code}"]
    (out,) = _bounded(lambda: _backend(server.url, max_retries=2, concurrency=1).generate([REQ]))
    assert out.completion == "\\boxed{5}" and out.error is None
    assert server.hits == 2


@pytest.mark.parametrize("code", [400, 413, 414, 422, 431])
def test_a_rejected_request_fails_alone_and_is_not_an_attempt(server, code):
    server.script = [f"status:{code}"]
    out = _bounded(
        lambda: _backend(server.url, max_retries=2, concurrency=1).generate(
            [REQ, GenRequest((("user", "What is 1 plus 1?"),), seed=4)]
        )
    )
    assert out[0].finish_reason == REQUEST_FAILED and out[0].error.startswith(f"HTTP {code}")
    assert out[0].completion == ""
    assert out[1].completion == "\\boxed{2}" and out[1].error is None
    assert server.hits == 2


def test_401_on_the_model_list_fails_before_the_run_with_a_hint(server):
    server.models_mode = "status:401"
    with pytest.raises(ModelLoadError, match="API key"):
        _bounded(lambda: _backend(server.url))


# --- body faults -----------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["drip", "stall", "slow_headers"])
def test_a_slow_or_stalled_body_is_cut_off_at_the_deadline(mode):
    srv = FakeOpenAI(mode=mode, drip_s=0.3)
    try:
        with pytest.raises(BackendUnavailable, match="deadline"):
            _bounded(lambda: _backend(srv.url, max_retries=1, timeout_s=1, concurrency=1).generate([REQ]))
        assert srv.hits == 2  # the first try and one retry, each cut off
    finally:
        srv.close()


@pytest.mark.slow
@pytest.mark.parametrize(
    "mode", ["drip", "stall", "slow_headers", "break_off", "malformed", "nontext", "deep", "html", "empty"]
)
def test_a_body_fault_is_retried_and_a_good_answer_then_counts(mode):
    srv = FakeOpenAI(drip_s=0.3)
    srv.script = [mode]
    try:
        (out,) = _bounded(lambda: _backend(srv.url, max_retries=2, timeout_s=1.5, concurrency=1).generate([REQ]))
        assert out.completion == "\\boxed{5}" and out.error is None
        assert srv.hits == 2
    finally:
        srv.close()


@pytest.mark.parametrize("mode", ["break_off", "malformed", "nontext", "deep"])
def test_a_body_fault_that_persists_stops_the_run(mode):
    srv = FakeOpenAI(mode=mode)
    try:
        with pytest.raises(BackendUnavailable, match="after 1 retries"):
            _bounded(lambda: _backend(srv.url, max_retries=1, concurrency=1).generate([REQ]))
    finally:
        srv.close()


def test_a_gzip_bomb_is_refused_while_it_is_read_and_the_request_fails_alone():
    srv = FakeOpenAI(mode="gzip_bomb", bomb_bytes=64 * 2**20)  # ~64 KB sent, 64 MB unpacked
    try:
        (out,) = _bounded(lambda: _backend(srv.url, max_reply_mib=1, concurrency=1).generate([REQ]))
        assert out.finish_reason == REQUEST_FAILED and "cap" in out.error and out.completion == ""
        assert srv.hits == 1  # not retried: the same request would get the same reply
    finally:
        srv.close()


def test_a_completion_over_its_cap_fails_alone():
    srv = FakeOpenAI(mode="gzip_bomb", bomb_bytes=2 * 2**20)
    try:
        (out,) = _bounded(lambda: _backend(srv.url, max_completion_chars=1000, concurrency=1).generate([REQ]))
        assert out.finish_reason == REQUEST_FAILED and "max_completion_chars" in out.error
    finally:
        srv.close()


def test_a_completion_with_a_lone_surrogate_fails_alone_and_the_wave_goes_on(server):
    server.script = ["surrogate"]
    out = _bounded(
        lambda: _backend(server.url, concurrency=1).generate(
            [REQ, GenRequest((("user", "What is 1 plus 1?"),), seed=4)]
        )
    )
    assert out[0].finish_reason == REQUEST_FAILED and "surrogate" in out[0].error
    assert out[0].completion == ""
    assert out[1].completion == "\\boxed{2}"


@pytest.mark.slow
def test_a_request_in_flight_past_progress_after_s_prints_a_line(capfd):
    srv = FakeOpenAI(mode="stall")
    try:
        with pytest.raises(BackendUnavailable):
            _bounded(
                lambda: _backend(srv.url, max_retries=0, timeout_s=2.5, progress_after_s=0.5, concurrency=1).generate(
                    [REQ]
                )
            )
    finally:
        srv.close()
    err = capfd.readouterr().err
    line = next(ln for ln in err.splitlines() if "still waiting" in ln)
    assert line.startswith(f"tasksieve: still waiting on {srv.url}: 1 request(s) in flight")


# --- bounds on the command line ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:notaport/v1",
        "http://127.0.0.1:99999/v1",
        "ftp://host/v1",
        "http:///v1",
        "127.0.0.1:8000/v1",
        "http://exa mple/v1",
        "http://h/\x00v1",
        "",
    ],
)
def test_a_malformed_base_url_is_a_one_line_usage_error(tmp_path, capsys, url):
    from tasksieve.pipeline.cli import main

    (tmp_path / "t.jsonl").write_text('{"task_id": "a", "prompt": "1+1", "answer": "2"}\n')
    code = main(
        [
            "run",
            "--input",
            str(tmp_path / "t.jsonl"),
            "--out",
            str(tmp_path / "out"),
            "--backend",
            "openai",
            "--base-url",
            url,
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and err.startswith("tasksieve: error: --base-url: ")


def test_a_malformed_base_url_in_a_config_is_refused():
    with pytest.raises(ValueError, match="base URL"):
        RunConfig.model_validate({"model": {"openai": {"base_url": "http://127.0.0.1:notaport/v1"}}})


def test_k_and_waves_are_bounded():
    for sampling in ({"k": 10**9}, {"waves": [10**9]}, {"waves": [1] * 10**5}):
        with pytest.raises(ValueError):
            RunConfig.model_validate({"sampling": sampling})


def test_a_huge_k_on_the_command_line_is_refused_in_one_line(tmp_path, capsys):
    from tasksieve.pipeline.cli import main

    (tmp_path / "t.jsonl").write_text('{"task_id": "a", "prompt": "1+1", "answer": "2"}\n')
    code = main(["run", "--input", str(tmp_path / "t.jsonl"), "--out", str(tmp_path / "out"), "-k", "1000000000"])
    err = capsys.readouterr().err.strip()
    # A bad option value is usage (2) in the one exit-code table (README, "Exit codes").
    assert code == 2 and "\n" not in err and "-k must be at most 4096" in err


# --- the queue the sampler tops up (open_queue) ------------------------------


def _ask(n: int, base: int = 0) -> list[GenRequest]:
    return [GenRequest((("user", f"What is {base + i} plus 1?"),), seed=2 * (base + i)) for i in range(n)]


def test_the_queue_returns_what_finished_and_takes_more_while_others_wait():
    """A slow request does not hold back the others: what the server
    answered comes back at once, and requests added meanwhile are sent."""
    srv = FakeOpenAI(gated=True)
    try:
        queue = _backend(srv.url, concurrency=4).open_queue(None, 64)
        first = queue.submit(_ask(3))
        assert queue.wait(lambda t, r: None, block=False) == []  # held by the server: a look, no wait
        srv.allow(1)
        got = dict(_bounded(lambda: queue.wait(lambda t, r: None)))
        assert len(got) == 1 and queue.in_flight == 2
        later = queue.submit(_ask(2, base=10))  # joins the two still held
        srv.allow(4)
        while queue.in_flight:
            got.update(_bounded(lambda: queue.wait(lambda t, r: None)))
        assert sorted(got) == sorted(first + later) and srv.hits == 5
        assert {got[t].completion for t in later} == {"\\boxed{11}", "\\boxed{12}"}
    finally:
        srv.close()


def test_closing_the_queue_sends_nothing_more():
    srv = FakeOpenAI(gated=True)
    try:
        queue = _backend(srv.url, concurrency=1).open_queue(None, 64)
        queue.submit(_ask(3))
        assert srv.arrived.wait(10)
        queue.close()
        srv.open_gate()
        assert queue.in_flight == 0
        queue.backend.pool.shutdown(wait=True)  # the one in flight finishes; the two queued never go
        assert srv.hits == 1
    finally:
        srv.close()


def test_a_refusal_in_the_queue_reports_the_finished_then_raises():
    srv = FakeOpenAI()
    srv.script = ["ok", "status:401"]
    try:
        queue = _backend(srv.url, concurrency=1, max_retries=1).open_queue(None, 64)
        queue.submit(_ask(3))
        heard = []
        with pytest.raises(ServerRefused):
            while queue.in_flight:
                _bounded(lambda: queue.wait(lambda t, r: heard.append(t)))
        assert heard == [0] and queue.in_flight == 0 and srv.hits == 2
    finally:
        srv.close()
