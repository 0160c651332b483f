"""`tasksieve dedup` end to end: the cheap stages only, no model, the same
outputs as `run`, a pool that is never modified, and a saved index that
gives the same drops as hashing the pool again."""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
import pyarrow.parquet as pq

TASKSIEVE = [sys.executable, "-m", "tasksieve.pipeline.cli"]


def _dedup(*args):
    return subprocess.run([*TASKSIEVE, "dedup", *args], capture_output=True, text=True, timeout=300)


def _drops(out):
    rows = pq.read_table(out / "results.parquet").to_pylist()
    return {
        (r["source"], r["task_id"]): (r["drop_stage"], r["drop_reason"], r["drop_detail"])
        for r in rows
        if r["status"] == "dropped"
    }


@pytest.mark.slow
def test_dedup_command_runs_the_cheap_stages_and_accounts_for_every_row(sample_dir, tmp_path):
    out = tmp_path / "out"
    proc = _dedup("--input", str(sample_dir), "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "row accounting: rows_in 98 == kept 72 + dropped 15 + quarantined 11  OK" in proc.stdout
    assert "loading model" not in proc.stderr and "dedup:" in proc.stderr  # progress, and no engine
    stages = {}
    for stage, _, _ in _drops(out).values():
        stages[stage] = stages.get(stage, 0) + 1
    assert stages == {"exact_dedup": 9, "near_dedup": 2, "decontaminate": 4}
    con = duckdb.connect(str(out / "curation.duckdb"), read_only=True)
    funnel = dict(con.execute("select stage, removed from funnel").fetchall())
    assert funnel["near_dedup"] == 2 and funnel["against_pool"] == 0
    assert con.execute("select sampling_mode, n_kept from runs").fetchone() == ("dedup-only", 72)
    con.close()


@pytest.mark.slow
def test_dedup_against_a_pool_saved_index_reused(sample_dir, tmp_path):
    # Last quarter's pool: vendor_b's Parquet delivery, as it was accepted then.
    pool = sample_dir / "vendor_b.parquet"
    before = hashlib.sha256(pool.read_bytes()).hexdigest()
    vendor_a = str(sample_dir / "vendor_a.jsonl")
    built = _dedup(
        "--input",
        vendor_a,
        "--out",
        str(tmp_path / "o1"),
        "--dedup-against",
        str(pool),
        "--save-index",
        str(tmp_path / "idx"),
    )
    assert built.returncode == 0, built.stderr[-2000:]
    assert "hashing 1 path(s)" in built.stderr and (tmp_path / "idx" / "meta.json").is_file()
    reused = _dedup("--input", vendor_a, "--out", str(tmp_path / "o2"), "--dedup-against", str(tmp_path / "idx"))
    assert reused.returncode == 0, reused.stderr[-2000:]
    assert "hashing" not in reused.stderr and "reference pool: index" in reused.stderr
    d1, d2 = _drops(tmp_path / "o1"), _drops(tmp_path / "o2")
    assert d1 == d2
    against = {k: json.loads(v[2]) for k, v in d1.items() if v[0] == "against_pool"}
    # vendor_b's B0025 is a copy of vendor_a's A-003; the GSM8K items differ between the two.
    assert {k[1]: (v["pool_task_id"], v["match"]) for k, v in against.items()} == {"A-003": ("B0025", "exact")}
    assert hashlib.sha256(pool.read_bytes()).hexdigest() == before


def test_bad_pool_or_index_fails_with_one_line(sample_dir, tmp_path):
    proc = _dedup("--input", str(sample_dir), "--out", str(tmp_path / "o"), "--dedup-against", str(tmp_path / "nope"))
    assert proc.returncode == 2 and "--dedup-against" in proc.stderr
    proc = _dedup("--input", str(sample_dir), "--out", str(tmp_path / "o"), "--save-index", str(tmp_path / "i"))
    assert proc.returncode == 2 and "needs --dedup-against" in proc.stderr


@pytest.mark.slow
def test_pool_files_that_reuse_task_ids_keep_every_task(tmp_path):
    """Two earlier sets with one source and the same task ids (quarters
    numbered from 1 again): each pool task is its own node, so a copy of a
    task of the first file is dropped against it, by `tasksieve dedup`
    and by the stages' plain functions (tests/plain_stages.py), not kept
    because the second file's task took its id. A task id spelling the
    suffix a repeat gets ("\\x1f#2") takes no other task's place either."""
    from tasksieve.transforms.dedup.minhash import MinHashParams
    from tasksieve.transforms.dedup.pool_index import _unique_node, pool_rows

    prompts = [
        "A farmer has 17 sheep and buys 5 more at the market on Tuesday. How many sheep does he have now?",
        "Compute the sum of the interior angles of a regular hexagon, giving your answer in degrees.",
        "A train travels 240 kilometres in 3 hours at a constant speed. What is its speed in km per hour?",
    ]
    pools = []
    for i, (prompt, tid) in enumerate(zip(prompts, ["t1", "t1", "t1\x1f#2"])):
        pools.append(tmp_path / f"q{i}.jsonl")
        pools[-1].write_text(
            json.dumps({"task_id": tid, "source": "vendorA", "prompt": prompt, "answer": str(i)}) + "\n"
        )
    nodes = [r["node"] for r in pool_rows([str(p) for p in pools], MinHashParams())]
    assert len(nodes) == 3 and len(set(nodes)) == 3
    seen, last = set(), {}  # one id 5,000 times, then ids spelling the suffixes it got, then it again
    ids = [_unique_node("pool\x1fv\x1ft1", seen, last) for _ in range(5000)]
    ids += [
        _unique_node(x, seen, last) for x in ("pool\x1fv\x1ft1\x1f#7", "pool\x1fv\x1ft1\x1f#5001", "pool\x1fv\x1ft1")
    ]
    assert len(set(ids)) == len(ids) == 5003 and ids[0] == "pool\x1fv\x1ft1"
    delivery = tmp_path / "delivery.jsonl"
    delivery.write_text(
        "".join(
            json.dumps({"task_id": f"new{i}", "source": "vendorB", "prompt": p, "answer": str(i)}) + "\n"
            for i, p in enumerate(prompts)
        )
    )
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from plain_stages import reference_outputs

    from tasksieve.schemas.config import load_config

    cfg = tmp_path / "cfg.toml"
    cfg.write_text("[dedup]\nsemantic = false\n[decontam]\nbenchmarks = []\n")
    out = tmp_path / "out"
    proc = _dedup(
        "--input", str(delivery), "--out", str(out), "--dedup-against", *map(str, pools), "--config", str(cfg)
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    reference = reference_outputs([delivery], load_config(cfg), pools)["results"]
    want = {(r["source"], r["task_id"]): (r["drop_stage"], r["drop_reason"], r["drop_detail"]) for r in reference}
    for engine, drops in (("batch", _drops(out)), ("plain", {k: v for k, v in want.items() if v[0]})):
        assert set(drops) == {("vendorB", f"new{i}") for i in range(3)}, (engine, drops)
        for i in range(3):
            assert json.loads(drops[("vendorB", f"new{i}")][2])["pool"] == str(pools[i]), (engine, i)
    assert _drops(out) == {k: v for k, v in want.items() if v[0]}
