import itertools
import random

import pytest

from fakes import ScriptedBackend, arithmetic_tasks, sample_plan
from tasksieve.transforms.backends.base import GenResult
from tasksieve.transforms.sample.classify import classify, wilson_interval
from tasksieve.transforms.sample.stage import needs_no_sampling, sample_tasks
from tasksieve.transforms.sample.policy import Policy, attempt_seed, next_attempts


def _plan(mode="sequential", k=8, waves=(2, 2, 4), lo=0.0, hi=1.0):
    return sample_plan(mode, k, waves, lo, hi)


def next_wave(mode, k, waves, n, p, band=(0.0, 1.0)):
    return next_attempts(Policy(mode, k, tuple(waves), *band), n, p)


def test_wave_schedule_and_stop_rule():
    assert next_wave("sequential", 8, [2, 2, 4], 0, 0) == 2
    assert next_wave("sequential", 8, [2, 2, 4], 2, 2) == 2
    assert next_wave("sequential", 8, [2, 2, 4], 4, 0) == 4
    assert next_wave("sequential", 8, [2, 2, 4], 2, 1) == 0  # a pass and a fail
    assert next_wave("sequential", 8, [2, 2, 4], 8, 8) == 0
    assert next_wave("sequential", 10, [3], 9, 9) == 1  # capped at k
    assert next_wave("fixed", 8, [2], 0, 0) == 8
    assert next_wave("sequential", 8, [2], 2, 1, band=(0.1, 0.9)) == 6  # narrowed band: all k


def _simulate(outcomes, mode, k=8, waves=(2, 2, 4)):
    """Run the stopping rule over a fixed outcome sequence."""
    n = p = 0
    while True:
        more = next_wave(mode, k, list(waves), n, p)
        if more == 0:
            return classify(p, n)["status"], n
        for _ in range(more):
            p += outcomes[n]
            n += 1


@pytest.mark.parametrize("k,waves", [(8, (2, 2, 4)), (8, (1,)), (5, (2, 3)), (16, (4, 4, 8))])
def test_sequential_decides_exactly_as_fixed_on_every_outcome_sequence(k, waves):
    def random_seqs():
        for s, q in itertools.product(range(300), (0.05, 0.5, 0.95)):
            rng = random.Random(s)
            yield [rng.random() < q for _ in range(k)]

    # Every sequence for k <= 8; a seeded sample of 900 for k = 16.
    seqs = itertools.product([0, 1], repeat=k) if k <= 8 else random_seqs()
    saved = 0
    for seq in seqs:
        seq = [int(x) for x in seq]
        fixed_status, fixed_n = _simulate(seq, "fixed", k, waves)
        seq_status, seq_n = _simulate(seq, "sequential", k, waves)
        assert seq_status == fixed_status, seq
        assert seq_n <= fixed_n == k
        saved += fixed_n - seq_n
    assert saved > 0


def test_seeds_are_distinct_per_attempt_and_reproducible():
    seeds = {attempt_seed(0, "h", i) for i in range(64)}
    assert len(seeds) == 64
    assert attempt_seed(0, "h", 3) == attempt_seed(0, "h", 3) != attempt_seed(1, "h", 3)


_tasks = arithmetic_tasks


def test_sample_tasks_batches_waves_and_classifies():
    backend = ScriptedBackend()
    tasks = _tasks("Calculate 2 + 3.", "Calculate 4 * 5.", "Calculate 9 - 4.")
    out = list(sample_tasks(tasks, backend, _plan()))
    results = {r["task_id"]: r for kind, r in out if kind == "result"}
    attempts = [r for kind, r in out if kind == "attempt"]
    assert results["t0"]["status"] == "all_pass" and results["t0"]["n_attempts"] == 8
    assert results["t1"]["status"] == "all_fail" and results["t1"]["n_attempts"] == 8
    # '-' passes on even seeds only: mixed, stopped early.
    assert results["t2"]["status"] == "learnable" and 0 < results["t2"]["n_pass"] < results["t2"]["n_attempts"] <= 8
    assert len(attempts) == sum(r["n_attempts"] for r in results.values())
    assert backend.calls == 3  # three waves, each one engine call for all tasks
    by_task = {}
    for a in attempts:
        by_task.setdefault(a["content_hash"], []).append(a["attempt_idx"])
    assert all(sorted(v) == list(range(len(v))) for v in by_task.values())
    assert all(a["verifier"] == "math" and a["model_id"] == "m@1" for a in attempts)


def test_fixed_mode_spends_all_k():
    backend = ScriptedBackend()
    out = list(sample_tasks(_tasks("Calculate 9 - 4."), backend, _plan(mode="fixed", k=6)))
    assert sum(1 for kind, _ in out if kind == "attempt") == 6
    assert backend.calls == 1


def test_every_domain_has_a_verifier_and_an_unknown_one_is_not_sampled():
    for domain in ("math", "exact", "code", "rubric"):
        assert needs_no_sampling({"domain": domain}) is None
    d = needs_no_sampling({"domain": "poetry", "task_id": "r"})
    assert d["drop_stage"] == "sample" and d["drop_reason"] == "no_verifier"


def test_classify_statuses_band_and_interval():
    assert classify(8, 8)["status"] == "all_pass"
    assert classify(0, 8)["status"] == "all_fail"
    mixed = classify(1, 2)
    assert mixed["status"] == "learnable" and mixed["difficulty"] == "medium"
    assert mixed["pass_rate_lo"] < 0.5 < mixed["pass_rate_hi"]
    assert classify(15, 16, 0.1, 0.9)["drop_reason"] == "pass_rate_above_band"
    assert classify(1, 16, 0.1, 0.9)["drop_reason"] == "pass_rate_below_band"
    lo, hi = wilson_interval(0, 8)
    assert lo == 0.0 and 0.3 < hi < 0.4
    with pytest.raises(ValueError):
        classify(0, 0)


class _Errors:
    model_id = "x"

    def generate(self, requests, on_result=None):
        return [GenResult("", 5, 0, "error", 0.0, error="engine said no") for _ in requests]


def test_a_generation_error_is_never_an_attempt_and_drops_its_task():
    out = list(sample_tasks(_tasks("Calculate 2 + 3."), _Errors(), _plan(k=2, waves=(2,))))
    assert [r for kind, r in out if kind == "attempt"] == []  # never verified, classified or cached
    (result,) = [r for kind, r in out if kind == "result"]
    assert result["status"] == "dropped" and result["drop_reason"] == "generation_failed"
    assert "engine said no" in result["drop_detail"]


def test_system_prompt_per_domain():
    from tasksieve.pipeline.run.preflight import make_plan
    from tasksieve.schemas.config import RunConfig
    from tasksieve.transforms.sample.stage import messages_for

    cfg = RunConfig()
    plan = make_plan(cfg, "r", "m@1")
    system = {
        d: dict(messages_for({"domain": d, "prompt": "p"}, plan))["system"] for d in ("math", "exact", "code", "rubric")
    }
    assert "\\boxed" in system["math"] and "```python" in system["code"]
    assert len(set(system.values())) == 4
    custom = RunConfig.model_validate({"sampling": {"system_prompts": {"code": "C"}}})
    other = make_plan(custom, "r", "m@1")
    assert dict(messages_for({"domain": "code", "prompt": "p"}, other))["system"] == "C"
    assert dict(messages_for({"domain": "exact", "prompt": "p"}, other))["system"] == system["exact"]  # default kept
    with pytest.raises(ValueError, match="unknown domain 'poetry'"):
        RunConfig.model_validate({"sampling": {"system_prompts": {"poetry": "x"}}})
    assert other.sampler_key != plan.sampler_key
