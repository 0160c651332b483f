"""Issue 14: the batch path of the cheap stages (transforms/dedup/batch.py,
`[dedup] batch = true`) makes the row path's decisions, row for row.

Kernels first (band keys bit for bit), then `tasksieve dedup` end to end:
results.parquet and quarantine.parquet of both paths compared on the
bundled sample, on a several-thousand-task bench pool (planted copies of
five kinds, shared sentences and templates), against a reference pool,
and on the DaskRunner."""

import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from tasksieve.transforms.dedup.minhash import MinHashParams, task_bands, text_of
from tasksieve.transforms.dedup.near import bucket_key, bucket_pairs, exact_key
from tasksieve.transforms.dedup import shards

TASKSIEVE = [sys.executable, "-m", "tasksieve.pipeline.cli"]
ROOT = Path(__file__).resolve().parent.parent
COLUMNS = ["source", "task_id", "status", "drop_stage", "drop_reason", "drop_detail", "content_hash", "line"]


def test_batch_band_keys_equal_the_row_path():
    rng = random.Random(0)
    words = "alpha beta gamma 12 delta 3.5 epsilon zeta 東京 x".split()
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(0, 90))) for _ in range(1500)]
    texts += ["q" * 40_000 + " 7", "", "ab"]  # one over the vectorised block, the empty text, one under a shingle
    for p in (MinHashParams(), MinHashParams(shingle="word", size=2, num_perm=64, bands=16, rows=4, seed=3)):
        tasks = [{"prompt": t} for t in texts]
        want = np.array([[bucket_key(b, k) for b, k in task_bands(t, p)] for t in tasks], dtype=np.int64)
        assert np.array_equal(shards.text_bands([text_of(t) for t in tasks], p), want)
    hashes = ["%032x" % rng.getrandbits(128) for _ in range(200)]
    assert shards.exact_keys(hashes).tolist() == [exact_key(h) for h in hashes]


def test_shard_buckets_give_the_row_path_edges():
    rng = random.Random(1)
    keys = np.array([rng.randrange(50) for _ in range(400)], dtype=np.int64)
    nodes = np.array([f"s\x1fn{rng.randrange(300)}" for _ in range(400)], dtype=object)
    by_key = {}
    for k, n in zip(keys.tolist(), nodes.tolist()):
        by_key.setdefault(k, []).append(n)
    want = {e for members in by_key.values() for e in bucket_pairs(members, 8)}
    got = set()
    for ks, ns in shards.split_by_shard(keys, nodes, 7).values():
        got |= {e for idx in shards.buckets(ks) for e in bucket_pairs(ns[idx].tolist(), 8)}
    assert got == want


def _run(inputs, out, cfg_text, tmp, *extra):
    cfg = tmp / f"{out.name}.toml"
    cfg.write_text(cfg_text)
    proc = subprocess.run([*TASKSIEVE, "dedup", *sum((["--input", str(i)] for i in inputs), []), "--out", str(out),
                           "--config", str(cfg), *extra], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _table(out, name, columns):
    t = pq.read_table(out / f"{name}.parquet")
    rows = t.select([c for c in columns if c in t.column_names]).to_pylist()
    return sorted(rows, key=lambda r: tuple(str(r.get(c)) for c in ("source", "task_id", "source_file", "line")))


def _compare(inputs, tmp, cfg_text, *extra):
    ref = tmp / "ref"
    bat = tmp / "batch"
    _run(inputs, ref, cfg_text.replace("[dedup]", "[dedup]\nbatch = false"), tmp, *extra)
    proc = _run(inputs, bat, cfg_text.replace("[dedup]", "[dedup]\nbatch = true"), tmp, *extra)
    a, b = _table(ref, "results", COLUMNS), _table(bat, "results", COLUMNS)
    assert len(a) == len(b) and a == b
    q = ["source", "source_file", "line", "task_id", "drop_stage", "drop_reason", "raw"]
    assert _table(ref, "quarantine", q) == _table(bat, "quarantine", q)
    return a, proc


def test_batch_path_same_decisions_on_the_bundled_sample(sample_dir, tmp_path):
    rows, proc = _compare([sample_dir], tmp_path, "[dedup]\n")
    assert sum(r["status"] == "dropped" for r in rows) == 15
    assert "row accounting" in proc.stdout and "OK" in proc.stdout


@pytest.fixture(scope="module")
def bench_pool(tmp_path_factory):
    sys.path.insert(0, str(ROOT / "bench"))
    from dedup import make_pool

    folder = tmp_path_factory.mktemp("pool")
    make_pool(5000, folder, seed=3)
    return folder


def test_batch_path_same_decisions_on_a_5000_task_pool(bench_pool, tmp_path):
    # Semantic candidates off here (the embedding model is the slow part);
    # the sample test above runs them on.
    rows, _ = _compare([bench_pool], tmp_path, "[dedup]\nsemantic = false\n[decontam]\nbenchmarks = ['gsm8k']\n")
    assert len(rows) == 5000
    stages = {r["drop_stage"] for r in rows if r["status"] == "dropped"}
    assert {"exact_dedup", "near_dedup"} <= stages


def test_batch_path_same_decisions_against_a_pool(bench_pool, tmp_path):
    files = sorted(bench_pool.glob("*.jsonl"))
    rows, _ = _compare([files[0]], tmp_path, "[dedup]\nsemantic = false\n", "--dedup-against", str(files[1]))
    assert any(r["drop_stage"] == "against_pool" for r in rows)


def test_batch_path_same_decisions_on_dask(sample_dir, tmp_path):
    ref = tmp_path / "ref"
    _run([sample_dir], ref, "[dedup]\n", tmp_path)
    dask = tmp_path / "dask"
    _run([sample_dir], dask, "[dedup]\nbatch = true\n", tmp_path, "--runner", "dask", "--dask-workers", "2")
    assert _table(ref, "results", COLUMNS) == _table(dask, "results", COLUMNS)
