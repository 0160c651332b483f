"""The whole funnel through Beam's in-process runner, with a scripted
backend so it runs in seconds. The real engine: test_e2e_vllm.py."""

import json

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fakes import scripted_backend
from tasksieve.pipeline.outputs.finalize import AccountingError, check_accounting
from tasksieve.pipeline.run.command import run
from tasksieve.schemas.config import RunConfig


@pytest.fixture(scope="module")
def curated(sample_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    figures = run([str(sample_dir)], str(out), RunConfig(), None, [], backend_factory=scripted_backend)
    return out, figures


def _results(out):
    return pq.read_table(out / "results.parquet").to_pylist()


def test_every_row_ends_in_exactly_one_place(curated):
    out, fig = curated
    rows = _results(out)
    assert fig["rows_in"] == 98 == len(rows)  # what the sample builder wrote
    statuses = {
        s: sum(r["status"] == s for r in rows) for s in ("learnable", "all_pass", "all_fail", "dropped", "quarantined")
    }
    assert sum(statuses.values()) == fig["rows_in"]
    assert all(statuses[s] > 0 for s in statuses)
    assert pq.read_table(out / "quarantine.parquet").num_rows == statuses["quarantined"] == 11


def test_quarantine_reasons_name_each_fault(curated):
    out, _ = curated
    q = {r["line"]: r for r in pq.read_table(out / "quarantine.parquet").to_pylist()}
    reasons = " | ".join(r["reason"] for r in q.values())
    for expected in (
        "malformed JSON",
        "JSON list",
        "'prompt' is missing",
        "'domain' is 'poetry'",
        "'expert_minutes' is negative",
        "'expert_minutes' is 'ten'",
        "'prompt' is a number",
        "has no 'answer'",
        "over the 100000-character limit",
        "invalid UTF-8",
        "truncated last line",
    ):
        assert expected in reasons, expected
    assert all(r["source_file"].endswith("vendor_a.jsonl") and r["line"] > 0 for r in q.values())


def test_planted_duplicates_and_benchmark_items_dropped_with_evidence(curated):
    out, _ = curated
    rows = _results(out)
    dups = [r for r in rows if r["drop_reason"] == "exact_duplicate"]
    by_id = {(r["source"], r["task_id"]): r for r in rows}
    planted = {("vendor_a", "A-045"): "A-001", ("vendor_a", "A-046"): "A-006"}
    for key, survivor in planted.items():
        assert json.loads(by_id[key]["drop_detail"])["duplicate_of"] == survivor
    cross = [r for r in dups if r["source"] == "vendor_b"]
    assert cross and all(json.loads(r["drop_detail"])["duplicate_of_source"] == "vendor_a" for r in cross)
    near = {r["task_id"]: json.loads(r["drop_detail"]) for r in rows if r["drop_stage"] == "near_dedup"}
    assert {k: v["duplicate_of"] for k, v in near.items()} == {"c-13": "A-047", "c-14": "A-048"}
    assert all(0.7 <= v["similarity"] < 1 and v["duplicate_of_source"] == "vendor_a" for v in near.values())
    contaminated = [r for r in rows if r["drop_stage"] == "decontaminate"]
    assert len(contaminated) == 4
    assert all(json.loads(r["drop_detail"])["benchmark"] == "gsm8k" for r in contaminated)


def test_learnable_set_and_attempts_agree(curated):
    import datasets

    out, fig = curated
    learnable = datasets.Dataset.from_parquet(str(out / "learnable.parquet"))
    assert len(learnable) == fig["learnable"] > 0
    attempts = pq.read_table(out / "attempts.parquet").to_pylist()
    per_hash = {}
    for a in attempts:
        per_hash.setdefault(a["content_hash"], []).append(a)
    for t in learnable:
        assert 0 < t["n_pass"] < t["n_attempts"]
        mine = per_hash[t["content_hash"]]
        assert len(mine) == t["n_attempts"] and sum(a["passed"] for a in mine) == t["n_pass"]
    assert fig["attempts"] == len(attempts) < fig["attempts_fixed_k"]


def test_duckdb_tables_funnel_and_costs(curated):
    out, fig = curated
    con = duckdb.connect(str(out / "curation.duckdb"), read_only=True)
    for table in ("runs", "tasks", "attempts", "drops", "costs", "quarantine"):
        assert con.execute(f"select count(*) from {table}").fetchone()[0] > 0, table
    funnel = con.execute("select stage, rows_in, removed, rows_out from funnel order by stage_order").fetchall()
    assert funnel[0][1] == fig["rows_in"]
    assert all(a[3] == b[1] for a, b in zip(funnel, funnel[1:]))  # each stage feeds the next
    assert funnel[-1][3] == fig["learnable"]
    total = con.execute("select sum(usd) from costs").fetchone()[0]
    assert total == pytest.approx(fig["total_usd"])
    # Dropped tasks keep their expert cost; quarantined rows are not priced.
    assert (
        con.execute(
            "select count(*) from costs c join drops d using (source, task_id) where c.component='expert'"
        ).fetchone()[0]
        == con.execute("select count(*) from drops").fetchone()[0]
    )
    n_attempts = con.execute("select count(*) from attempts").fetchone()[0]
    assert con.execute("select count(*) from costs where component='generation'").fetchone()[0] == n_attempts
    con.close()


def test_runs_are_deterministic_and_accumulate_history(sample_dir, curated, tmp_path):
    out, fig = curated
    again = run([str(sample_dir)], str(out), RunConfig(), None, [], backend_factory=scripted_backend)
    assert again["run_id"] != fig["run_id"]
    rows = _results(out)
    con = duckdb.connect(str(out / "curation.duckdb"), read_only=True)
    assert con.execute("select count(distinct run_id) from tasks").fetchone()[0] == 2
    per_run = con.execute(
        "select run_id, list(status order by source, task_id, source_file, line) from tasks group by run_id"
    ).fetchall()
    assert per_run[0][1] == per_run[1][1]
    assert [r["status"] for r in rows] == per_run[0][1]
    con.close()


def test_accounting_check_fails_loudly_on_a_lost_row(curated):
    out, fig = curated
    results = pq.read_table(out / "results.parquet")
    quarantine = pq.read_table(out / "quarantine.parquet")
    check_accounting(fig["rows_in"], results, quarantine)
    with pytest.raises(AccountingError, match="99 rows read but 98 rows accounted"):
        check_accounting(fig["rows_in"] + 1, results, quarantine)
    with pytest.raises(AccountingError, match="quarantine.parquet has"):
        check_accounting(fig["rows_in"], results, quarantine.slice(1))
    # A row whose status is missing or not one of ours is not counted as any of them.
    i = results.schema.get_field_index("status")
    statuses = results["status"].to_pylist()
    for bad in (None, "kept "):
        changed = results.set_column(i, results.schema.field(i), pa.array([bad] + statuses[1:], pa.string()))
        with pytest.raises(AccountingError, match="unknown statuses"):
            check_accounting(fig["rows_in"], changed, quarantine)


def test_a_staged_chunk_is_named_by_its_rows_keys_alone():
    """A retried chunk rewrites its own file (the same name), and two chunks
    never share one: not when one key differs, nor when the same characters
    split differently between fields."""
    from tasksieve.pipeline.run.graph import STAGED
    from tasksieve.pipeline.outputs.staging import chunk_name, chunk_table

    rows = [{"source": "v", "task_id": f"t{i}", "line": i, "prompt": f"p{i}"} for i in range(50)]
    name = chunk_name(chunk_table(rows, STAGED["results"], same={"run_id": "a", "status": "kept"}))
    assert name == chunk_name(chunk_table([dict(r) for r in rows], STAGED["results"], same={"run_id": "b"}))
    assert name == chunk_name(chunk_table([dict(r, prompt="other") for r in rows], STAGED["results"]))
    changed = [dict(r) for r in rows]
    changed[7]["line"] = 8
    assert chunk_name(chunk_table(changed, STAGED["results"])) != name
    assert chunk_name(chunk_table(rows[:-1], STAGED["results"])) != name
    split = [{"source": "a", "task_id": "b,c", "line": 1}], [{"source": "a,b", "task_id": "c", "line": 1}]
    assert len({chunk_name(chunk_table(r, STAGED["results"])) for r in split}) == 2
    costs = [{"source": "v", "task_id": "t", "component": c, "line": None} for c in ("expert", "tokens")]
    assert chunk_name(chunk_table(costs[:1], STAGED["costs"])) != chunk_name(chunk_table(costs[1:], STAGED["costs"]))
