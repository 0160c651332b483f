"""What a buyer gets from a run (issue 47): Parquet files that say how
their pass rates were measured (key-value metadata), `tasksieve --version`,
and a dollar budget that means what the buyer pays for a task (its expert
price plus the rollouts to train on it), so that it chooses a real subset."""

import json
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest

from tasksieve import __version__
from tasksieve.pipeline.cli import main
from tasksieve.pipeline.outputs.provenance import read as provenance
from tasksieve.schemas.config import RunConfig
from tasksieve.transforms.select.budget import buyer_price

KEYS = {"run_id", "model_id", "k", "sampling_policy", "system_prompt_sha256", "verifier_versions", "tasksieve_version"}


@pytest.fixture(scope="module")
def sample_run(sample_dir, tmp_path_factory):
    from fakes import better_scripted_backend
    from tasksieve.pipeline.run.command import run

    out = tmp_path_factory.mktemp("buyer-out")
    figures = run([str(sample_dir)], str(out), RunConfig(), None, [], backend_factory=better_scripted_backend)
    assert figures["learnable"] > 10
    return out, figures


def test_version_flag():
    p = subprocess.run(
        [sys.executable, "-m", "tasksieve.pipeline.cli", "--version"], capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0 and p.stdout.strip() == f"tasksieve {__version__}"


@pytest.mark.slow
def test_learnable_and_results_say_how_they_were_measured(sample_run):
    import duckdb

    out, figures = sample_run
    con = duckdb.connect(str(out / "curation.duckdb"), read_only=True)
    run_id, model_id, k, mode = con.execute("select run_id, model_id, k, sampling_mode from runs").fetchone()
    con.close()
    for name in ("learnable", "results"):
        meta = provenance(out / f"{name}.parquet")
        assert KEYS <= set(meta), (name, meta)
        assert meta["run_id"] == run_id and meta["model_id"] == model_id == "scripted@v2"
        assert meta["k"] == str(k) == "8" and meta["sampling_policy"].startswith(mode)
        assert meta["tasksieve_version"] == __version__
        hashes = json.loads(meta["system_prompt_sha256"])
        assert set(hashes) >= {"math", "code"} and all(len(h) == 64 for h in hashes.values())
        assert "math-verify" in json.loads(meta["verifier_versions"])["math"]
    # The rows themselves are unchanged: a file copied elsewhere still loads.
    assert pq.read_table(out / "learnable.parquet").num_rows == figures["learnable"]


@pytest.mark.slow
def test_dollar_budget_buys_what_the_buyer_pays_for_and_chooses_a_subset(sample_run, capsys):
    """--budget-usd 50 on the sample: tasks cost their expert price ($1 to $6
    at vendor_a's $60/h) plus 8 rollouts, so $50 buys a real subset, never
    more than $50, with each selected row priced at least its expert price;
    the selected file carries the run's provenance and its selection id."""
    import duckdb

    out, figures = sample_run
    assert main(["select", str(out), "--budget-usd", "50"]) == 0
    sel = pq.read_table(out / "selected.parquet").to_pylist()
    assert 0 < len(sel) < figures["learnable"], (len(sel), figures["learnable"])
    assert sum(r["price_usd"] for r in sel) <= 50
    con = duckdb.connect(str(out / "curation.duckdb"), read_only=True)
    expert = dict(
        con.execute(
            "select task_id, sum(usd) from costs where component = 'expert' and unit <> 'unpriced' group by task_id"
        ).fetchall()
    )
    con.close()
    for r in sel:
        assert r["price_usd"] >= expert.get(r["task_id"], 0) > 0, r["task_id"]
    meta = provenance(out / "selected.parquet")
    assert KEYS <= set(meta) and meta["selection_id"] == sel[0]["selection_id"]
    assert "expert price" in capsys.readouterr().out


def test_an_unpriced_task_is_never_cheaper_than_the_priciest_priced_one():
    price = buyer_price(np.array([2.0, np.nan, 6.0, -1.0]), np.array([0.1, 0.1, 0.1, 0.1]))
    assert list(price) == pytest.approx([2.1, 6.1, 6.1, 6.1])
    assert list(buyer_price(np.array([np.nan]), np.array([0.5]))) == [0.5]
