"""The attempt cache, resume after a dead backend, re-curation with a new
model, and the replay backend: whole runs through the in-process runner
with scripted backends (the real OpenAI server: test_openai_backend.py)."""

import json

import duckdb
import pyarrow.parquet as pq
import pytest

from fakes import BetterScriptedBackend, ScriptedBackend
from tasksieve.pipeline.run.errors import RunStopped
from tasksieve.pipeline.run.command import run
from tasksieve.schemas.config import RunConfig
from tasksieve.transforms.backends.base import BackendUnavailable


class DyingBackend(ScriptedBackend):
    """Answers `budget` requests, reporting each as it finishes, then dies
    mid-wave like a killed server."""

    def __init__(self, budget):
        super().__init__()
        self.budget = budget

    def generate(self, requests, on_result=None):
        out = []
        for i, r in enumerate(requests):
            if self.budget == 0:
                raise BackendUnavailable("http://127.0.0.1:8000/v1 failed after 5 retries: APIConnectionError")
            self.budget -= 1
            out.append(super().generate([r])[0])
            if on_result:
                on_result(i, out[-1])
        return out


def _factory(backend):
    def factory():
        return backend

    factory.model_id = backend.model_id
    return factory


def _cost_by_unit(out, run_id):
    con = duckdb.connect(str(out / "curation.duckdb"), read_only=True)
    try:
        return dict(
            con.execute(
                "SELECT unit, count(*) FROM costs WHERE run_id = ? AND component = 'generation' GROUP BY unit", [run_id]
            ).fetchall()
        )
    finally:
        con.close()


def _statuses(out):
    return {(r["source"], r["task_id"]): r["status"] for r in pq.read_table(out / "results.parquet").to_pylist()}


@pytest.fixture(scope="module")
def resumed(sample_dir, tmp_path_factory):
    """A run whose backend dies after 60 generations, then the same command again."""
    out = tmp_path_factory.mktemp("resume")
    with pytest.raises(RunStopped) as stopped:
        run([str(sample_dir)], str(out), RunConfig(), None, [], backend_factory=_factory(DyingBackend(60)))
    assert len(list((out / "_staging").iterdir())) == 1  # what the killed run left behind
    after_kill = sorted((out / "attempt_cache").glob("*.jsonl"))
    cached_lines = sum(len(f.read_text().splitlines()) for f in after_kill)
    fig = run([str(sample_dir)], str(out), RunConfig(), None, [], backend_factory=_factory(ScriptedBackend()))
    return out, str(stopped.value), cached_lines, fig


@pytest.mark.slow
def test_a_dead_backend_stops_the_run_with_a_resume_message(resumed):
    out, message, cached_lines, _ = resumed
    assert "stopped answering" in message and "same command" in message and "attempt_cache" in message
    assert cached_lines == 60  # every generation made before the death was saved


def test_resume_reuses_every_finished_attempt_and_pays_for_none_twice(resumed):
    out, _, cached_lines, fig = resumed
    attempts = pq.read_table(out / "attempts.parquet").to_pylist()
    assert fig["attempts_reused"] == cached_lines == sum(a["reused_from_run"] is not None for a in attempts)
    assert fig["attempts_generated"] == len(attempts) - cached_lines  # the engine made only the missing ones
    keys = [(a["content_hash"], a["attempt_idx"]) for a in attempts]
    assert len(keys) == len(set(keys))
    assert not (out / "_staging").exists()  # the killed run's leftovers were cleared
    # The killed run never finished, so the resumed run pays for its attempts, once.
    assert _cost_by_unit(out, fig["run_id"]) == {"gpu_second": len(attempts)}


def test_identical_rerun_generates_nothing_and_costs_no_generation(resumed, sample_dir):
    out, _, _, first = resumed
    before = _statuses(out)
    fig = run([str(sample_dir)], str(out), RunConfig(), None, [], backend_factory=_factory(ScriptedBackend()))
    assert fig["attempts_generated"] == 0 and fig["attempts_reused"] == fig["attempts"] == first["attempts"]
    assert _cost_by_unit(out, fig["run_id"]) == {"reused": fig["attempts"]}
    assert _statuses(out) == before
    attempts = pq.read_table(out / "attempts.parquet").to_pylist()
    assert {a["reused_from_run"] for a in attempts} == {first["run_id"]}


@pytest.mark.slow
def test_a_new_model_reuses_nothing_and_keeps_the_old_models_history(sample_dir, tmp_path):
    first = run([str(sample_dir)], str(tmp_path), RunConfig(), None, [], backend_factory=_factory(ScriptedBackend()))
    second = run(
        [str(sample_dir)], str(tmp_path), RunConfig(), None, [], backend_factory=_factory(BetterScriptedBackend())
    )
    assert second["attempts_reused"] == 0 and second["attempts_generated"] == second["attempts"]
    con = duckdb.connect(str(tmp_path / "curation.duckdb"), read_only=True)
    try:
        moved = con.execute(
            """
            SELECT count(*) FROM tasks o JOIN tasks n USING (content_hash)
            WHERE o.run_id = ? AND n.run_id = ? AND o.status = 'all_fail' AND n.status = 'learnable'""",
            [first["run_id"], second["run_id"]],
        ).fetchone()[0]
        models = dict(con.execute("SELECT run_id, model_id FROM runs").fetchall())
        history = con.execute(
            """
            SELECT count(*) FROM task_history
            WHERE run_id = ? AND previous_status = 'all_fail' AND status = 'learnable'""",
            [second["run_id"]],
        ).fetchone()[0]
    finally:
        con.close()
    assert moved > 0  # products the old model never solved are learnable for the new one
    assert history == moved  # the view analysts use for exactly this
    assert models == {first["run_id"]: "scripted@test", second["run_id"]: "scripted@v2"}


def test_torn_cache_lines_and_other_models_are_ignored(tmp_path):
    from tasksieve.transforms.sample.attempt_cache import pick_cached, read_cache_file, signed

    f = tmp_path / "r1-1.jsonl"
    good = {
        "content_hash": "h",
        "model_id": "m@1",
        "sampler_key": "s",
        "attempt_idx": 0,
        "seed": 7,
        "completion": "x",
        "prompt_tokens": 1,
        "completion_tokens": 1,
        "finish_reason": "stop",
        "gen_seconds": 0.1,
        "error": None,
        "run_id": "r1",
    }
    lines = [signed(good), signed(dict(good, model_id="m@2"))]
    f.write_text("".join(json.dumps(r) + "\n" for r in lines) + '{"content_hash": "h", "mo')
    recs = list(read_cache_file(str(f), "m@1", "s"))
    assert [r["model_id"] for r in recs] == ["m@1"]
    # A finished run's copy of an attempt wins: that run owns its cost.
    picked = pick_cached(recs + [dict(recs[0], run_id="r2")], frozenset({"r2"}))
    assert [r["run_id"] for r in picked] == ["r2"]


@pytest.mark.slow
def test_replay_recomputes_pass_rates_from_recorded_attempts_at_no_generation_cost(sample_dir, tmp_path):
    recorded = tmp_path / "recorded"
    first = run([str(sample_dir)], str(recorded), RunConfig(), None, [], backend_factory=_factory(ScriptedBackend()))
    rollouts = pq.read_table(recorded / "attempts.parquet")
    # A vendor's rollouts: drop one task's attempts entirely.
    gone = rollouts["content_hash"][0].as_py()
    kept = rollouts.take([i for i, h in enumerate(rollouts["content_hash"].to_pylist()) if h != gone])
    pq.write_table(kept, tmp_path / "rollouts.parquet")
    cfg = RunConfig.model_validate(
        {"model": {"backend": "replay", "replay_paths": [str(tmp_path / "rollouts.parquet")]}}
    )
    out = tmp_path / "replayed"
    fig = run([str(sample_dir)], str(out), cfg, None, [])
    replayed = {r["content_hash"]: r for r in pq.read_table(out / "results.parquet").to_pylist() if r["content_hash"]}
    original = {
        r["content_hash"]: r for r in pq.read_table(recorded / "results.parquet").to_pylist() if r["content_hash"]
    }
    assert replayed[gone]["status"] == "dropped" and replayed[gone]["drop_reason"] == "no_recorded_attempts"
    for h, r in original.items():
        if h != gone and r["n_attempts"]:
            assert (replayed[h]["status"], replayed[h]["n_pass"]) == (r["status"], r["n_pass"])
    assert fig["attempts"] == kept.num_rows
    assert _cost_by_unit(out, fig["run_id"]) == {"reused": kept.num_rows}
    assert fig["rows_in"] == first["rows_in"]  # accounting checked inside run(); every row still counted
    assert not (out / "attempt_cache").exists()  # replayed attempts are not cached as new generations
