"""The same graph on Beam's DaskRunner over a 2-process local Dask cluster
and on the in-process runner: identical outcomes, accounting on both, and
the engine loaded once per worker process."""

import os

import pyarrow.parquet as pq
import pytest

from fakes import counting_backend, scripted_backend
from tasksieve.pipeline.run.command import run
from tasksieve.schemas.config import RunConfig

pytestmark = pytest.mark.filterwarnings("ignore")


def _outcome(out):
    rows = pq.read_table(out / "results.parquet").to_pylist()
    per_row = sorted(
        (r["source_file"], r["line"], r["status"], r["drop_stage"], r["drop_reason"], r["n_pass"], r["n_attempts"])
        for r in rows
    )
    learnable = sorted((r["source"], r["task_id"]) for r in rows if r["status"] == "learnable")
    total = sum(pq.read_table(out / "costs.parquet").column("usd").to_pylist())
    return per_row, learnable, total


@pytest.fixture(scope="module")
def both(sample_dir, tmp_path_factory):
    local = tmp_path_factory.mktemp("inprocess")
    dask = tmp_path_factory.mktemp("dask")
    loads = tmp_path_factory.mktemp("loads") / "pids.txt"
    os.environ["TASKSIEVE_TEST_LOADS"] = str(loads)  # the workers inherit it
    fig_local = run([str(sample_dir)], str(local), RunConfig(), None, [], backend_factory=scripted_backend)
    fig_dask = run(
        [str(sample_dir)], str(dask), RunConfig(), "dask", [], backend_factory=counting_backend, dask_workers=2
    )
    return (local, fig_local), (dask, fig_dask), loads


@pytest.mark.slow
def test_dask_and_inprocess_give_identical_results(both):
    (local, fig_local), (dask, fig_dask), _ = both
    rows_l, learn_l, cost_l = _outcome(local)
    rows_d, learn_d, cost_d = _outcome(dask)
    assert rows_d == rows_l
    assert learn_d == learn_l and learn_l
    assert cost_d == pytest.approx(cost_l)
    assert pq.read_table(dask / "attempts.parquet").num_rows == pq.read_table(local / "attempts.parquet").num_rows


@pytest.mark.slow
def test_row_accounting_holds_on_both(both):
    (_, fig_local), (_, fig_dask), _ = both
    for fig in (fig_local, fig_dask):
        parts = sum(fig[s] for s in ("learnable", "all_pass", "all_fail", "dropped", "quarantined"))
        assert parts == fig["rows_in"] == 98


@pytest.mark.slow
def test_engine_loaded_once_per_worker(both):
    *_, loads = both
    pids = loads.read_text().split()
    assert len(pids) == len(set(pids))  # never twice in one process
    assert 1 <= len(pids) <= 2  # at most one per worker of the 2-worker cluster
    assert str(os.getpid()) not in pids  # the driver never loads it on a cluster


def test_beams_type_check_is_off_unless_asked_for():
    """The construction-time type check is off by default (it only costs
    start-up on tasksieve's own graph); a user's own flag either way wins."""
    from apache_beam.options.pipeline_options import PipelineOptions, TypeOptions

    from tasksieve.pipeline.run.execute import _without_type_check

    def checked(args):
        return PipelineOptions(_without_type_check(args)).view_as(TypeOptions).pipeline_type_check

    assert checked([]) is False and checked(["--direct_num_workers=1"]) is False
    assert checked(["--pipeline_type_check"]) is True
    assert checked(["--no_pipeline_type_check"]) is False
