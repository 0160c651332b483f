"""Issue 14, 46: the batch engine (transforms/batch/, the only engine of
read .. decontaminate) makes the decisions of the stage packages' Beam-free
functions (tests/plain_stages.py, the reference), row for row: `tasksieve
dedup` end to end, comparing every column of results.parquet,
quarantine.parquet and costs.parquet except the run id (kept, dropped and
quarantined rows, drop stages and reasons, the matched ids and
similarities in drop details) with the reference's, on the bundled
sample, a 5,000-task bench pool, the same against a reference pool, the
same-problem hard cases, the hostile corpus, and on the DaskRunner. The
kernels and units are in test_batch_dedup.py."""

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from tasksieve.schemas.config import DedupConfig
from tasksieve.transforms.batch import shards
from tasksieve.transforms.dedup.minhash import MinHashParams
from tasksieve.transforms.dedup.near_rule import similarity
from tasksieve.transforms.dedup.signatures import jaccard_counts
from tasksieve.transforms.normalize import normalize_text

TASKSIEVE = [sys.executable, "-m", "tasksieve.pipeline.cli"]
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))


def _run(inputs, out, cfg_text, tmp, *extra):
    cfg = tmp / f"{out.name}.toml"
    cfg.write_text(cfg_text)
    proc = subprocess.run(
        [
            *TASKSIEVE,
            "dedup",
            *sum((["--input", str(i)] for i in inputs), []),
            "--out",
            str(out),
            "--config",
            str(cfg),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _table(out, name):
    t = pq.read_table(out / f"{name}.parquet")
    return t.drop_columns([c for c in ("run_id",) if c in t.column_names]).to_pylist()


def _compare(inputs, tmp, cfg_text, *extra, batch_extra=(), memory_mib=None, against=()):
    """The batch engine and the plain reference on the same inputs; every
    column but the run id must agree. `memory_mib`: the batch path's budget
    for values held as objects (None: the default, which holds every value
    of these small inputs; 0: every value spilled to disk; 1: some held,
    most spilled). `against`: reference pools (`--dedup-against`)."""
    from plain_stages import reference_outputs

    from tasksieve.schemas.config import load_config

    bat = tmp / "batch"
    held = "" if memory_mib is None else f"\nmemory_mib = {memory_mib}"
    pools = sum((["--dedup-against", str(a)] for a in against), [])
    proc = _run(inputs, bat, cfg_text.replace("[dedup]", "[dedup]" + held), tmp, *extra, *pools, *batch_extra)
    ref = reference_outputs(inputs, load_config(tmp / f"{bat.name}.toml"), against)
    a, b = ref["results"], _table(bat, "results")
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x == y, (x.get("task_id"), {k: (x[k], y[k]) for k in x if x[k] != y[k]})
    assert ref["quarantine"] == _table(bat, "quarantine")
    assert ref["costs"] == _table(bat, "costs")
    return a, proc


@pytest.mark.slow
def test_batch_path_same_decisions_on_the_bundled_sample(sample_dir, tmp_path):
    rows, proc = _compare([sample_dir], tmp_path, "[dedup]\n")
    assert sum(r["status"] == "dropped" for r in rows) == 15
    assert "row accounting" in proc.stdout and "OK" in proc.stdout
    assert "rows/s" in proc.stderr  # the progress lines
    assert "near dedup: edge shards judged (done)" in proc.stderr  # the steps between reading and kept rows
    assert "hash shards (done): 8 shards" in proc.stderr  # 98 rows: the fewest id, hash and bucket shards


@pytest.fixture(scope="module")
def bench_pool(tmp_path_factory):
    from dedup import make_pool

    folder = tmp_path_factory.mktemp("pool")
    make_pool(5000, folder, seed=3)
    return folder


@pytest.mark.slow
def test_batch_path_same_decisions_on_a_5000_task_pool(bench_pool, tmp_path):
    # The meaning stage is off here (embedding 5,000 prompts is the slow part);
    # the sample and the hard cases run it. 32 id, hash and bucket shards,
    # where 5,000 tasks would get 8: the decisions must not depend on how many.
    rows, proc = _compare(
        [bench_pool], tmp_path, "[dedup]\nsemantic = false\nshards = 32\n[decontam]\nbenchmarks = ['gsm8k']\n"
    )
    assert "hash shards (done): 32 shards" in proc.stderr
    assert len(rows) == 5000
    stages = {r["drop_stage"] for r in rows if r["status"] == "dropped"}
    assert {"exact_dedup", "near_dedup"} <= stages


@pytest.mark.slow
def test_batch_path_same_decisions_against_a_pool(bench_pool, tmp_path):
    files = sorted(bench_pool.glob("*.jsonl"))
    # Three edge shards and five bucket shards (not the defaults): the
    # decisions must not depend on how many; the pool's bucket records go to
    # the delivery's bucket shards.
    rows, _ = _compare(
        [files[0]],
        tmp_path,
        "[dedup]\nsemantic = false\nedge_shards = 3\nshards = 5\n",
        memory_mib=1,
        against=[files[1]],
    )
    assert any(r["drop_stage"] == "against_pool" for r in rows)


@pytest.mark.slow
def test_batch_path_same_decisions_on_the_same_problem_hard_cases(tmp_path):
    import same_problem_cases as cases

    rows, n = [], 0
    pairs = (
        cases.paraphrase_pairs() + cases.sibling_pairs() + cases.variant_pairs()[:20] + cases.shared_setup_pairs()[:20]
    )
    for a, b in pairs:
        for t in (a, b):
            n += 1
            rows.append(
                {
                    k: v
                    for k, v in dict(t, task_id=f"{t['task_id']}-{n}", domain=t.get("domain") or "math").items()
                    if k in ("task_id", "prompt", "answer", "domain", "tests", "entry_point")
                }
            )
    delivery = tmp_path / "hard.jsonl"
    delivery.write_text("".join(json.dumps(r) + "\n" for r in rows))
    # The meaning stage on (the default); every edge judged in one edge
    # shard, and ids, hashes, buckets and meaning keys in three shards.
    got, _ = _compare([delivery], tmp_path, "[dedup]\nedge_shards = 1\nshards = 3\n")
    assert any(r["drop_reason"] == "near_duplicate" and '"semantic"' in (r["drop_detail"] or "") for r in got)
    assert sum(r["drop_reason"] == "near_variant" for r in got) >= 20  # issue 43: one of each variant pair
    # Two questions on one setup: neither is dropped for the other (a setup
    # may still be a variant of another pair's setup, filled with other numbers).
    for r in got:
        if r["task_id"].startswith("setup-") and r["status"] == "dropped":
            ev = json.loads(r["drop_detail"])
            partner = ev.get("duplicate_of") or ev.get("variant_of") or ""
            assert partner.split("-")[:2] != r["task_id"].split("-")[:2], (r["task_id"], partner)
    assert all(r["template_group"] for r in got if r["status"] != "quarantined")


@pytest.mark.slow
def test_batch_path_same_decisions_and_quarantine_on_the_hostile_corpus(tmp_path):
    import hostile

    corpus = hostile.build(tmp_path / "corpus")
    rows, _ = _compare([corpus.hostile_in], tmp_path, "[dedup]\n", memory_mib=0)
    assert sum(r["status"] == "quarantined" for r in rows) >= 1000


@pytest.mark.slow
def test_ids_that_spell_another_node_lose_no_row_and_hide_no_copy(tmp_path):
    """Task nodes are built from (source, task_id), which a delivery writes:
    ids holding the separator or the source "pool" once spelled another
    task's node (a row lost on the old row-at-a-time graph, a near copy
    kept on the batch path) or a pool node (copies never paired). Each
    crafted pair below is a near copy: exactly one of each must go, on the
    batch path as in the reference, and no row may vanish; the unrelated
    rows must stay."""
    us = "\x1f"
    one = "Compute the sum of the first hundred odd positive integers and explain each step of the work."
    two = "A train leaves the station at noon and travels west; find when it passes the second signal box."
    three = "Describe how a binary search tree keeps its keys ordered, and give the cost of one lookup."
    rows = [
        {"source": f"a{us}b", "task_id": "c", "prompt": one},
        {"source": "a", "task_id": f"b{us}c", "prompt": one + "!"},
        {"source": "pool", "task_id": "p1", "prompt": two},
        {"source": "pool", "task_id": "p2", "prompt": two + "!"},
        {
            "source": "pool",
            "task_id": f"x{us}a",
            "prompt": "Name the largest planet and give its radius in km, please.",
        },
        {"source": f"{us}1:pool", "task_id": "p3", "prompt": three},
        {
            "source": f"{us}1:x",
            "task_id": "p4",
            "prompt": "List the primes below fifty whose digits sum to an odd number.",
        },
        {"source": "x", "task_id": f"p4{us}", "prompt": three + "!"},
    ]
    delivery = tmp_path / "crafted.jsonl"
    delivery.write_text("".join(json.dumps(dict(r, answer="1", domain="math")) + "\n" for r in rows))
    pool = tmp_path / "pool.jsonl"  # its row's pool node is "pool<US>x<US>a", the crafted task's old node
    pool.write_text(
        json.dumps(
            {
                "source": "x",
                "task_id": "a",
                "prompt": "Describe the water cycle in four short steps.",
                "answer": "1",
                "domain": "math",
            }
        )
        + "\n"
    )
    got, proc = _compare([delivery], tmp_path, "[dedup]\nsemantic = false\n", against=[pool])
    assert len(got) == len(rows) and "OK" in proc.stdout
    status = {(r["source"], r["task_id"]): r["status"] for r in got}
    for pair in (
        ((f"a{us}b", "c"), ("a", f"b{us}c")),
        (("pool", "p1"), ("pool", "p2")),
        ((f"{us}1:pool", "p3"), ("x", f"p4{us}")),
    ):
        assert sorted(status[k] for k in pair) == ["dropped", "kept"], pair
    assert status[("pool", f"x{us}a")] == status[(f"{us}1:x", "p4")] == "kept"


@pytest.mark.slow
def test_repeated_ids_are_quarantined_as_the_plain_stages_do(tmp_path):
    """A delivery repeats ids within a file and across files, three times
    and more, with the same prompt (rows exact dedup would also want) and
    with other prompts (rows hashed to other shards than their first): the
    first row by (file, line) stays, each later row is quarantined naming
    it, as the reference does, with every value spilled."""
    rng = random.Random(5)
    prompts = [
        f"Problem {i}: find x when {i + 2}x + {i + 1} = {7 * i + 3}, and show each step of the work." for i in range(12)
    ]
    folder = tmp_path / "in"
    folder.mkdir()
    rows = {}
    for name in ("b.jsonl", "a.jsonl"):  # b is written first; a sorts first, so its rows come first
        rows[name] = [
            {
                "source": rng.choice(["s1", "s2"]),
                "task_id": f"t{rng.randint(0, 60)}",
                "prompt": rng.choice(prompts) + ("" if rng.random() < 0.5 else f" ({name} {n})"),
                "answer": "1",
                "domain": "math",
            }
            for n in range(150)
        ]
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows[name]))
    got, proc = _compare(
        [folder / "b.jsonl", folder / "a.jsonl"], tmp_path, "[dedup]\nsemantic = false\n", memory_mib=0
    )
    assert "OK" in proc.stdout
    first = {}
    for name in ("a.jsonl", "b.jsonl"):
        for line, r in enumerate(rows[name], 1):
            first.setdefault((r["source"], r["task_id"]), (name, line))
    assert len(first) < 250  # ids do repeat, within and across the files
    quarantined = [r for r in got if r["status"] == "quarantined"]
    assert len(quarantined) == 300 - len(first)
    for r in got:
        where = (Path(r["source_file"]).name, r["line"])
        assert (r["status"] == "quarantined") == (where != first[(r["source"], r["task_id"])]), r
    for q in _table(tmp_path / "batch", "quarantine"):
        name, line = first[(q["source"], q["task_id"])]
        assert q["reason"].endswith(f"{name}:{line})") and "repeats within source" in q["reason"], q


@pytest.mark.slow
def test_batch_path_same_decisions_on_dask(sample_dir, tmp_path):
    _compare([sample_dir], tmp_path, "[dedup]\n", batch_extra=("--runner", "dask", "--dask-workers", "2"))


@pytest.mark.slow
@pytest.mark.parametrize("runner", [(), ("--runner", "dask", "--dask-workers", "2")], ids=["in_process", "dask"])
def test_candidates_with_none_confirmed_keep_every_row(tmp_path, runner):
    """Siblings of one template: near-identical words, other numbers and
    answers. MinHash pairs them and the same-problem rules clear every
    pair, so the cluster step has no confirmed edge and outputs nothing at
    all (not an empty map); every row must still come out kept, as on the
    reference, on both runners."""
    template = (
        "A farmer has {a} crates of apples with {b} apples in each crate, and sells {c} apples at the "
        "market on Saturday morning. How many apples does the farmer have left after the market?"
    )
    rows = []
    for i, (a, b, c) in enumerate([(3, 12, 7), (4, 15, 9), (6, 11, 5), (8, 13, 21), (9, 14, 30)]):
        rows.append(
            {"task_id": f"s{i}", "domain": "math", "prompt": template.format(a=a, b=b, c=c), "answer": str(a * b - c)}
        )
    # Every sibling shares a band with the first (a candidate edge), at a
    # shingle Jaccard over the threshold: only the rules can clear them.
    texts = [normalize_text(r["prompt"]) for r in rows]
    p = MinHashParams()
    keys = shards.text_bands(texts, p)
    inter, lens = jaccard_counts(texts, np.zeros(len(rows) - 1, dtype=np.int64), np.arange(1, len(rows)), p)
    assert all(set(keys[0].tolist()) & set(k.tolist()) for k in keys[1:])
    assert all(similarity(x, lens[0], lens[j]) >= DedupConfig().threshold for j, x in enumerate(inter.tolist(), 1))
    delivery = tmp_path / "siblings.jsonl"
    delivery.write_text("".join(json.dumps(r) + "\n" for r in rows))
    got, proc = _compare([delivery], tmp_path, "[dedup]\nsemantic = false\n", batch_extra=runner)
    assert [r["status"] for r in got] == ["kept"] * len(rows) and "OK" in proc.stdout
