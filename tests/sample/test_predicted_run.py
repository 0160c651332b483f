"""`predicted` sampling through a whole run: the prediction per task lands in
results and curation.duckdb, a second run learns from the first, and the
report scores the predictions (Brier, reliability bins)."""

import duckdb
import pyarrow.parquet as pq
import pytest

from fakes import scripted_backend
from tasksieve.pipeline.report.command import write_report
from tasksieve.pipeline.run.command import run
from tasksieve.schemas.config import RunConfig


@pytest.mark.slow
def test_two_predicted_runs_record_learn_and_report(sample_dir, tmp_path):
    cfg = RunConfig.model_validate({"sampling": {"mode": "predicted", "k": 8}})
    out = tmp_path / "out"
    first = run([str(sample_dir)], str(out), cfg, None, [], backend_factory=scripted_backend)
    rows = [r for r in pq.read_table(out / "results.parquet").to_pylist() if r["n_attempts"]]
    assert rows and all(r["predicted_pass_rate"] is not None for r in rows)
    # Nothing known in the first run: one flat prior for every task.
    assert len({round(r["predicted_pass_rate"], 6) for r in rows[:20]}) <= 2

    second = run([str(sample_dir)], str(out), cfg, None, [], backend_factory=scripted_backend)
    con = duckdb.connect(str(out / "curation.duckdb"), read_only=True)
    by_run = dict(con.execute("select run_id, sum(n_attempts) from tasks group by run_id").fetchall())
    spread = con.execute(
        "select count(distinct round(predicted_pass_rate, 3)) from tasks where run_id = ?", [second["run_id"]]
    ).fetchone()[0]
    con.close()
    # The second run predicted each task from the first run's results: it
    # tells tasks apart and screens the ones the first run always or never solved.
    assert spread > 3
    assert by_run[second["run_id"]] < by_run[first["run_id"]]
    _, terminal = write_report(out)
    assert "difficulty predicted before sampling" in terminal and "Brier" in terminal
    assert 'id="table-calibration"' in (out / "report.html").read_text()
