"""The sampling stage's side of a broken backend: a failed request is never
an attempt (never verified, classified or cached), non-text from any
backend is quarantined per request, a wave is never built whole in memory,
and replayed rows that cannot be attempts are skipped alone."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fakes import ScriptedBackend, arithmetic_tasks, sample_plan
from tasksieve.transforms.backends.base import REQUEST_FAILED, GenRequest, GenResult, ModelLoadError
from tasksieve.transforms.backends.replay import ReplayBackend
from tasksieve.transforms.sample import stage
from tasksieve.transforms.sample.stage import SamplingStats, sample_tasks


def _plan(mode="fixed", k=4, waves=(2, 2, 4)):
    return sample_plan(mode, k, waves)


_tasks = arithmetic_tasks


class _Cache:
    def __init__(self):
        self.records = []

    def write(self, rec):
        json.dumps(rec, ensure_ascii=False).encode("utf-8")  # what the real writer does: text must be text
        self.records.append(rec)

    def sync(self):
        pass


class _Faulty(ScriptedBackend):
    """Answers like ScriptedBackend, but the first request of task h0 gets
    `bad` instead, reported through on_result like a real backend."""

    def __init__(self, bad: GenResult):
        super().__init__()
        self.bad = bad
        self.sizes = []

    def generate(self, requests, on_result=None):
        self.sizes.append(len(requests))
        out = super().generate(requests)
        for i, r in enumerate(requests):
            if r.content_hash == "h0" and r.attempt_idx == 0:
                out[i] = self.bad
            if on_result:
                on_result(i, out[i])
        return out


@pytest.mark.parametrize(
    "bad",
    [
        GenResult("", 0, 0, REQUEST_FAILED, 0.1, error="HTTP 400: prompt too long"),
        GenResult("", 0, 0, "error", 0.1, error="HTTP 401: bad key"),
        GenResult("\\boxed{5}\ud800", 3, 2, "stop", 0.1),  # a lone surrogate from the engine
        GenResult(None, 3, 2, "stop", 0.1),  # not text at all
    ],
)
def test_a_failed_or_non_text_request_is_never_an_attempt_nor_cached(bad):
    cache, stats = _Cache(), SamplingStats()
    out = list(
        sample_tasks(_tasks("Calculate 2 + 3.", "Calculate 4 + 4."), _Faulty(bad), _plan(), cache=cache, stats=stats)
    )
    attempts = [r for kind, r in out if kind == "attempt"]
    results = {r["task_id"]: r for kind, r in out if kind == "result"}
    assert not any(a["content_hash"] == "h0" and a["attempt_idx"] == 0 for a in attempts)
    assert not any(r["content_hash"] == "h0" and r["attempt_idx"] == 0 for r in cache.records)
    assert len(attempts) == len(cache.records) == 7
    assert results["t0"]["status"] == "dropped" and results["t0"]["drop_reason"] == "generation_failed"
    assert results["t1"]["status"] == "all_pass"
    assert stats.failed == 1 and stats.generated == 7 and stats.first_failure


def test_a_wave_larger_than_the_cap_is_sent_in_slices_and_decides_the_same(monkeypatch):
    tasks = _tasks("Calculate 2 + 3.", "Calculate 4 * 5.", "Calculate 9 - 4.", "Calculate 8 - 1.")
    whole = ScriptedBackend()
    expected = list(sample_tasks(tasks, whole, _plan(mode="sequential", k=8)))
    monkeypatch.setattr(stage, "MAX_WAVE_REQUESTS", 3)
    sliced = _Faulty(GenResult("", 0, 0, "unused", 0.0))
    sliced.bad = None

    def generate(requests, on_result=None):
        sliced.sizes.append(len(requests))
        return ScriptedBackend.generate(sliced, requests)

    sliced.generate = generate
    got = list(sample_tasks(tasks, sliced, _plan(mode="sequential", k=8)))
    assert max(sliced.sizes) <= 3
    assert [(k, r.get("status"), r.get("attempt_idx"), r.get("passed")) for k, r in got] == [
        (k, r.get("status"), r.get("attempt_idx"), r.get("passed")) for k, r in expected
    ]


def test_replayed_rows_that_cannot_be_attempts_are_skipped_alone(tmp_path, capfd):
    rows = [
        {"content_hash": "h0", "attempt_idx": 0, "completion": "\\boxed{5}", "prompt_tokens": "12 tokens"},
        {
            "content_hash": "h0",
            "attempt_idx": 1,
            "completion": "\\boxed{5}",
            "prompt_tokens": 12,
            "gen_seconds": "fast",
        },
        {
            "content_hash": "h0",
            "attempt_idx": 2,
            "completion": "\\boxed{6}",
            "prompt_tokens": 12,
            "completion_tokens": 3,
            "gen_seconds": 0.5,
            "finish_reason": "stop",
        },
        {"content_hash": "h0", "attempt_idx": 3, "completion": "\\boxed{5}", "prompt_tokens": -4},
        {"content_hash": "h0", "attempt_idx": 4, "completion": "\\boxed{5}", "prompt_tokens": 1.5},
    ]
    path = tmp_path / "recorded.parquet"
    table = pa.Table.from_pylist(
        [{k: (json.dumps(v) if not isinstance(v, str) else v) for k, v in r.items()} for r in rows]
    )
    pq.write_table(table, path)
    path2 = tmp_path / "recorded.jsonl"
    path2.write_text("".join(json.dumps(r) + "\n" for r in rows))
    backend = ReplayBackend([str(path2)], "m@1")
    out = backend.generate([GenRequest((), seed=0, content_hash="h0", attempt_idx=i) for i in range(2)])
    assert out[0].completion == "\\boxed{6}" and out[0].prompt_tokens == 12 and out[0].gen_seconds == 0.5
    assert out[1].finish_reason == "not_recorded"  # the bad rows are not attempts: one recorded attempt
    assert backend.skipped == 4
    err = capfd.readouterr().err
    assert "4 recorded row(s) skipped" in err and "12 tokens" in err
    # Every column text, as a careless export writes them: no row is an attempt, said in one line.
    with pytest.raises(ModelLoadError, match="no usable recorded attempts"):
        ReplayBackend([str(path)], "m@1")
    assert "5 recorded row(s) skipped" in capfd.readouterr().err
