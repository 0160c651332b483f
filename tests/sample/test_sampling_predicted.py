"""The `predicted` mode in the sampling stage: stop points fixed before the
first attempt from what was decided before, the prediction recorded per task."""

import duckdb
import pytest

from fakes import ScriptedBackend
from tasksieve.schemas.config import RunConfig, SamplingConfig
from tasksieve.transforms.sample.policy import Policy, next_attempts
from tasksieve.transforms.sample.prior_history import OnlinePredictor, earlier_runs
from tasksieve.transforms.sample.stage import SamplePlan, sample_tasks


def _plan(k=8, keep=0.95):
    return SamplePlan(
        run_id="r",
        model_id="m@1",
        sampler_key="sk",
        sampling=SamplingConfig(mode="predicted", k=k, seed=0, system_prompt="sys", predicted={"keep_signal": keep}),
    )


def _tasks(prompts, start=0):
    return [
        {
            "task_id": f"t{i}",
            "source": "v",
            "domain": "math",
            "prompt": p,
            "answer": str(eval(p[10:-1])),
            "content_hash": f"h{i:04d}",
        }
        for i, p in enumerate(prompts, start)
    ]


def _sums(n, start=0):
    return _tasks([f"Calculate {a} + {a + 3}." for a in range(start, start + n)], start)


def _products(n, start=0):
    return _tasks([f"Calculate {a} * {a + 2}." for a in range(start, start + n)], start)


def _results(out):
    return {r["task_id"]: r for kind, r in out if kind == "result"}


def test_without_history_it_decides_like_sequential_and_records_the_flat_prediction():
    backend = ScriptedBackend()
    tasks = _tasks(["Calculate 2 + 3.", "Calculate 4 * 5.", "Calculate 9 - 4."])
    res = _results(sample_tasks(tasks, backend, _plan()))
    assert res["t0"]["status"] == "all_pass" and res["t1"]["status"] == "all_fail"
    assert res["t2"]["status"] == "learnable"
    # A flat U-shaped prior: predicted 0.5 for every task, and nothing screened short.
    assert all(r["predicted_pass_rate"] == pytest.approx(0.5, abs=1e-6) for r in res.values())


def test_what_earlier_batches_showed_screens_the_next_batch():
    """Sums always pass, products never: once a batch has shown it, the next
    batch's sums and products are screened with far fewer attempts than k."""
    backend = ScriptedBackend()
    predictor = OnlinePredictor(8, 0.95)
    first = _results(sample_tasks(_sums(40) + _products(40, 40), backend, _plan(), predictor=predictor))
    used_first = sum(r["n_attempts"] for r in first.values())
    second = _results(sample_tasks(_sums(40, 100) + _products(40, 140), backend, _plan(), predictor=predictor))
    used_second = sum(r["n_attempts"] for r in second.values())
    # Nothing known yet (the flat prior): long streaks before a task stops.
    assert used_first >= 80 * 6
    assert used_second <= 80 * 2
    assert all(r["status"] == ("all_pass" if "+" in r["prompt"] else "all_fail") for r in second.values())
    sums = [r["predicted_pass_rate"] for r in second.values() if "+" in r["prompt"]]
    products = [r["predicted_pass_rate"] for r in second.values() if "*" in r["prompt"]]
    assert min(sums) > 0.7 and max(products) < 0.3


def test_a_batch_is_never_predicted_from_its_own_attempts():
    backend = ScriptedBackend()
    predictor = OnlinePredictor(8, 0.95)
    seen = []
    real_plan = predictor.plan
    predictor.plan = lambda tasks: (seen.append(len(predictor.tasks)), real_plan(tasks))[1]
    list(sample_tasks(_sums(10), backend, _plan(), predictor=predictor))
    list(sample_tasks(_sums(10, 10), backend, _plan(), predictor=predictor))
    assert seen == [0, 10]


def test_earlier_runs_are_read_from_curation_duckdb(tmp_path):
    db = tmp_path / "curation.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE runs (run_id VARCHAR, started_at VARCHAR)")
    con.execute(
        "CREATE TABLE tasks (run_id VARCHAR, prompt VARCHAR, domain VARCHAR, source VARCHAR, batch_id VARCHAR, "
        "answer VARCHAR, n_pass BIGINT, n_attempts BIGINT)"
    )
    con.execute("INSERT INTO runs VALUES ('old', '2026-01-01'), ('now', '2026-02-01')")
    con.execute(
        "INSERT INTO tasks VALUES ('old', 'Calculate 1 + 2.', 'math', 'v', NULL, '3', 8, 8), "
        "('old', 'dropped before sampling', 'math', 'v', NULL, NULL, NULL, NULL), "
        "('now', 'Calculate 5 + 2.', 'math', 'v', NULL, '7', 1, 2)"
    )
    con.close()
    tasks, passes, attempts = earlier_runs(str(db), "now")
    assert [t["prompt"] for t in tasks] == ["Calculate 1 + 2."] and passes == [8] and attempts == [8]
    assert earlier_runs(str(tmp_path / "missing.duckdb"), "now") == ([], [], [])


def test_a_narrowed_band_samples_all_k_as_sequential_does():
    pol = Policy("predicted", 8, (2, 2, 4), 0.1, 0.9)
    assert next_attempts(pol, 2, 2, (1, 1)) == 6


def test_predicted_is_a_mode_and_its_settings_do_not_key_the_cache():
    cfg = RunConfig.model_validate({"sampling": {"mode": "predicted", "predicted": {"keep_signal": 0.9}}})
    assert cfg.sampling.predicted.keep_signal == 0.9
    assert cfg.sampling.sampler_key() == RunConfig().sampling.sampler_key()
    with pytest.raises(ValueError):
        RunConfig.model_validate({"sampling": {"predicted": {"keep_signal": 1.5}}})


def test_the_history_is_bounded_and_refitted_as_it_grows(monkeypatch):
    import tasksieve.transforms.sample.prior_history as ph

    monkeypatch.setattr(ph, "MAX_HISTORY", 50)
    predictor = OnlinePredictor(8, 0.95)
    fits = []
    real_fit = predictor.model.fit
    predictor.model.fit = lambda *a: (fits.append(len(a[0])), real_fit(*a))[1]
    task = _sums(1)[0]
    predictor.plan([task])
    assert fits == []  # nothing known: nothing to fit
    for i in range(40):
        predictor.observe(dict(task, prompt=f"Calculate {i} + 1."), 1, 1)
    predictor.plan([task])
    predictor.observe(task, 1, 1)
    predictor.plan([task])  # 41 < 1.1 x 40: no refit yet
    assert fits == [40]
    for i in range(30):
        predictor.observe(task, 1, 1)
    assert len(predictor.tasks) <= 55
    predictor.plan([task])
    assert len(fits) == 2
