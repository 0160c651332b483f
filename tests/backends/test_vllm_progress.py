"""The real engine, stepped by VllmBackend (backends/vllm.py): each request
is told of as it finishes, so the sampling bar moves while the engine works
(issue 47); the sampling queue adds requests while others are in flight,
a judge call made meanwhile shares the engine, and every request's
completion is the one `generate` gives for its seed (issue 41). One engine
load for the file."""

import pytest

from tasksieve.transforms.sample.attempt_bar import SamplingProgress

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def backend():
    from tasksieve.pipeline.setup.models import ensure_default_model
    from tasksieve.schemas.config import ModelConfig, SamplingConfig
    from tasksieve.transforms.backends.vllm import VllmBackend

    sampling = SamplingConfig(max_tokens=8, seed=0)
    return VllmBackend(
        str(ensure_default_model()), "smollm2@test", sampling, ModelConfig(max_model_len=256, kv_cache_gib=0.25)
    )


def _requests(n):
    from tasksieve.transforms.backends.base import GenRequest

    return [
        GenRequest(messages=(("user", f"Calculate {i} + 1."),), seed=100 + i, content_hash=f"h{i}", attempt_idx=0)
        for i in range(n)
    ]


class _Told(SamplingProgress):
    """A sampling bar that counts the generations it hears of."""

    n = 0

    def generated(self, n):
        self.n += n


def test_the_real_engine_reports_each_request_as_it_finishes(backend):
    assert backend.reports_progress
    events = []
    results = backend.generate(
        _requests(5),
        on_result=lambda i, r: events.append(("result", i)),
        on_progress=lambda n: events.append(("told", n)),
    )
    assert len(results) == 5 and all(r.completion_tokens > 0 for r in results)
    assert sum(n for what, n in events if what == "told") == 5
    # Each result is told of before it is handed over, while the call runs.
    assert [what for what, _ in events] == ["told", "result"] * 5
    assert sorted(i for what, i in events if what == "result") == list(range(5))
    assert all(r.gen_seconds > 0 for r in results)


def test_the_queue_takes_requests_while_the_engine_works_and_gives_generates_completions(backend):
    requests = _requests(6)
    alone = [r.completion for r in backend.generate(requests)]
    queue = backend.open_queue(told := _Told(), 64)
    heard, got = [], {}
    first = queue.submit(requests[:3])
    got.update(queue.wait(lambda t, r: heard.append(t)))
    assert got and queue.in_flight == 3 - len(got)
    later = queue.submit(requests[3:])  # joins the running batch
    judged = backend.generate(requests[:2])  # a judge call meanwhile: the queue's requests go on
    assert [r.completion for r in judged] == alone[:2]
    assert queue.in_flight == 6 - len(got)  # what the judge's steps finished is still ours to hand over
    while queue.in_flight or queue.done:
        got.update(queue.wait(lambda t, r: heard.append(t)))
    assert sorted(got) == sorted(first + later) == sorted(heard)
    tickets = first + later
    assert [got[t].completion for t in tickets] == alone  # the same completion for the same seed
    assert told.n == 6
    # Closing with requests in flight gives them up; the engine is free again.
    queue = backend.open_queue(SamplingProgress(), 64)
    queue.submit(_requests(4))
    queue.close()
    assert queue.in_flight == 0
    assert not backend.llm.llm_engine.has_unfinished_requests()
    assert [r.completion for r in backend.generate(requests[:1])] == alone[:1]


def test_the_queue_keeps_at_most_its_limit_in_the_engine(backend):
    requests = _requests(5)
    alone = [r.completion for r in backend.generate(requests)]
    queue = backend.open_queue(SamplingProgress(), 2)
    tickets = queue.submit(requests)
    steps, step = [], queue.engine.step
    queue.engine.step = lambda: (steps.append(1), step())[1]
    got, most, calls = {}, 0, 0
    while queue.in_flight or queue.done:
        most = max(most, len(queue.tickets))
        before, calls = len(steps), calls + 1
        # Every other wait must not block: one engine step, whatever finished in it.
        got.update(queue.wait(lambda t, r: None, block=calls % 2 == 0))
        assert calls % 2 == 0 or len(steps) - before == 1
    assert most == 2 and queue.in_flight == 0
    assert [got[t].completion for t in tickets] == alone


def test_the_judges_requests_join_the_queue_uncounted_with_generates_completions(backend):
    requests = _requests(4)
    alone = [r.completion for r in backend.generate(requests)]
    queue = backend.open_queue(told := _Told(), 64)
    assert queue.takes_judge
    attempts = queue.submit(requests[:2])
    judge = queue.submit(requests[2:], counted=False)  # the judge's, beside the attempts
    got = {}
    while queue.in_flight:
        got.update(queue.wait(lambda t, r: None))
    assert sorted(got) == sorted(attempts + judge)
    assert [got[t].completion for t in attempts + judge] == alone
    assert told.n == 2  # the bar counts attempts only


def test_a_prompt_over_max_model_len_fails_alone(backend):
    """vLLM refuses a whole call for one prompt over max_model_len: a hostile
    attempt quoted into a judge prompt failed every attempt of its wave, and
    ended a queued run. Refused one at a time, it fails alone (a failed
    request), in `generate` and in the queue."""
    from tasksieve.transforms.backends.base import REQUEST_FAILED, GenRequest

    long = GenRequest(messages=(("user", "word " * 400),), seed=7, content_hash="long", attempt_idx=0)
    reqs = _requests(2)
    out = backend.generate([reqs[0], long, reqs[1]])
    assert out[1].finish_reason == REQUEST_FAILED and "VLLMValidationError" in (out[1].error or "")
    assert [r.completion for r in (out[0], out[2])] == [r.completion for r in backend.generate(reqs)]
    queue = backend.open_queue(_Told(), limit=4)
    tickets = queue.submit([long, reqs[0]])
    got = {}
    while len(got) < 2:
        queue.wait(lambda t, res: got.__setitem__(t, res))
    assert got[tickets[0]].finish_reason == REQUEST_FAILED and got[tickets[1]].error is None
    queue.close()
