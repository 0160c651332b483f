"""The sampling bar moves while the real engine works: VllmBackend hands
vLLM a bar factory (`use_tqdm`) that relays each finished request, so the
progress hears of every request before `generate` returns (issue 47). Held
to the installed vLLM: its engine loop is what calls the relay."""

import pytest

pytestmark = pytest.mark.vllm


def test_the_real_engine_reports_each_request_while_the_call_runs():
    from tasksieve.pipeline.setup.models import ensure_default_model
    from tasksieve.schemas.config import ModelConfig, SamplingConfig
    from tasksieve.transforms.backends.base import GenRequest
    from tasksieve.transforms.backends.vllm import VllmBackend

    sampling = SamplingConfig(max_tokens=8, seed=0)
    backend = VllmBackend(
        str(ensure_default_model()), "smollm2@test", sampling, ModelConfig(max_model_len=256, kv_cache_gib=0.25)
    )
    assert backend.reports_progress
    requests = [
        GenRequest(messages=(("user", f"Calculate {i} + 1."),), seed=100 + i, content_hash=f"h{i}", attempt_idx=0)
        for i in range(5)
    ]
    events = []
    results = backend.generate(
        requests, on_result=lambda i, r: events.append(("result", i)), on_progress=lambda n: events.append(("told", n))
    )
    assert len(results) == 5 and all(r.completion_tokens > 0 for r in results)
    told = [e for e in events if e[0] == "told"]
    assert sum(n for _, n in told) == 5
    assert events.index(("result", 0)) == len(told)  # every request told before the first result came back
    # Without a listener it draws nothing of its own (one renderer) and still answers.
    assert len(backend.generate(requests[:2])) == 2
