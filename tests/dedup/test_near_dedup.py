"""Near dedup and dedup against a reference pool: each kind of near
duplicate is caught with its evidence, template-sharing problems are kept,
bad input neither crashes nor clusters, the pool is never modified, and a
reused index gives the same drops as a rebuilt one."""

import hashlib
import json

import numpy as np
import pytest

from tasksieve.transforms.dedup.near import bucket_pairs, find_near_duplicates, resolve_component
from tasksieve.transforms.dedup.near_rule import confirmed, number_overlap
from tasksieve.transforms.dedup.minhash import MinHashParams, jaccard, shingle_hashes, signature, task_bands
from tasksieve.transforms.normalize import normalize_text, with_hash
from tasksieve.transforms.dedup.pool_index import (
    PoolIndexError,
    build_index,
    index_row_groups,
    load_meta,
    read_row_group,
)

P = MinHashParams()

BASE = (
    "Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes muffins for "
    "her friends every day with four. She sells the remainder at the farmers' market daily for $2 per "
    "fresh duck egg. How much in dollars does she make every day at the farmers' market?"
)
VARIANTS = {
    "number": BASE.replace("16 eggs", "18 eggs"),
    "name": BASE.replace("Janet's", "Maria's"),
    "reorder": (
        "She eats three for breakfast every morning and bakes muffins for her friends every day with four. "
        "Janet's ducks lay 16 eggs per day. She sells the remainder at the farmers' market daily for $2 per "
        "fresh duck egg. How much in dollars does she make every day at the farmers' market?"
    ),
    "added_sentence": BASE + " Ignore any eggs that break on the way.",
}
# One template, refilled: distinct problems that must all be kept.
TEMPLATED = [
    "Tom's hens lay 12 eggs per week. He uses 2 for omelettes every weekend and gives 5 to his neighbours. "
    "He sells the rest at the corner shop for $3 per egg. How much money does he earn each week?",
    "Ana's hens lay 30 eggs per week. She uses 6 for omelettes every weekend and gives 9 to her neighbours. "
    "She sells the rest at the corner shop for $4 per egg. How much money does she earn each week?",
    "Li's hens lay 21 eggs per week. He uses 3 for omelettes every weekend and gives 8 to his neighbours. "
    "He sells the rest at the corner shop for $5 per egg. How much money does he earn each week?",
] + [f"Calculate {a} + {b}." for a in range(1, 6) for b in range(1, 6)]


def _task(tid, prompt, source="v", created=None, answer="1", line=1):
    return with_hash(
        {
            "task_id": tid,
            "source": source,
            "domain": "math",
            "prompt": prompt,
            "answer": answer,
            "created_at": created,
            "source_file": f"{source}.jsonl",
            "line": line,
        }
    )


def _run(tasks, pool_index=None, threshold=0.7, within=True):
    """The near-dedup stage's function (find_near_duplicates, the reference
    the batch engine is tested against in tests/batch/), shingles only, with
    the reference pool's rows read from its saved index: (kept ids,
    {dropped id: row})."""
    pool = [r for unit in index_row_groups(pool_index) for r in read_row_group(unit)] if pool_index else []
    out = list(find_near_duplicates(tasks, pool, P, threshold, semantic=False, within=within))
    assert len(out) == len(tasks)
    kept = sorted(t["task_id"] for tag, t in out if tag == "kept")
    return kept, {t["task_id"]: t for tag, t in out if tag == "dropped"}


def test_each_kind_of_near_duplicate_is_dropped_with_survivor_and_similarity():
    tasks = [_task("orig", BASE, created="2026-01-01")]
    tasks += [_task(k, v, created="2026-02-01", line=i + 2) for i, k_v in enumerate(VARIANTS.items()) for k, v in [k_v]]
    kept, dropped = _run(tasks)
    assert kept == ["orig"]
    assert set(dropped) == set(VARIANTS)
    for tid, row in dropped.items():
        d = json.loads(row["drop_detail"])
        if tid == "number":  # a quantity edited: a variant of the original (issue 43), named with the edit
            assert row["drop_stage"] == "near_dedup" and row["drop_reason"] == "near_variant"
            assert d["variant_of"] == "orig" and d["variant_of_source"] == "v" and d["relation"] == "variant"
            assert d["edited"] == {"original_only": ["16"], "variant_only": ["18"]}
        else:
            assert row["drop_stage"] == "near_dedup" and row["drop_reason"] == "near_duplicate"
            assert d["duplicate_of"] == "orig" and d["duplicate_of_source"] == "v" and d["relation"] == "duplicate"
        # The recorded similarity is the real Jaccard, recomputed here.
        assert d["similarity"] == pytest.approx(jaccard(normalize_text(VARIANTS[tid]), normalize_text(BASE)), abs=1e-4)
        assert 0.7 <= d["similarity"] < 1.0


def test_template_sharing_problems_are_all_kept():
    tasks = [_task(f"t{i}", q, line=i) for i, q in enumerate(TEMPLATED)]
    kept, dropped = _run(tasks)
    assert dropped == {} and len(kept) == len(TEMPLATED)


def test_number_guard_separates_an_edit_from_a_refilled_template():
    assert number_overlap("calculate 1 + 8.", "calculate 1 + 9.") == pytest.approx(1 / 3, abs=1e-4)
    assert number_overlap("no numbers here", "calculate 1 + 9.") == 1.0
    short = jaccard("calculate 1 + 8.", "calculate 1 + 9.")
    assert 0.7 <= short < 0.9 and not confirmed(short, 1 / 3, 0.7, 0.5, 0.9)  # similar text, new problem
    edit = jaccard(normalize_text(BASE), normalize_text(VARIANTS["number"]))
    assert edit >= 0.9 and confirmed(
        edit, number_overlap(normalize_text(BASE), normalize_text(VARIANTS["number"])), 0.7, 0.5, 0.9
    )


def test_survivor_is_the_same_whatever_the_input_order():
    tasks = [
        _task("late", VARIANTS["name"], source="a", created="2026-03-01"),
        _task("early", BASE, source="b", created="2026-01-01"),
        _task("undated", VARIANTS["number"], source="a", created=None),
    ]
    for order in (tasks, tasks[::-1]):
        kept, dropped = _run(order)
        assert kept == ["early"] and set(dropped) == {"late", "undated"}


def test_transitive_member_names_survivor_and_the_edge_that_linked_it():
    a = BASE
    b = a + " Ignore any eggs that break on the way."
    c = b + " Round to the nearest cent and explain each step of the calculation."
    tasks = [
        _task("a", a, created="2026-01-01"),
        _task("b", b, created="2026-01-02"),
        _task("c", c, created="2026-01-03"),
    ]
    _, dropped = _run(tasks)
    dc = json.loads(dropped["c"]["drop_detail"])
    assert dc["duplicate_of"] == "a"
    assert dc["matched_task_id"] in ("a", "b") and dc["matched_similarity"] >= 0.7


def test_bad_input_does_not_crash_or_cluster():
    huge = " ".join(f"word{i}" for i in range(20000))  # ~150k characters
    code_a = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
    code_b = "def add(a, b):\n  return a + b\ndef sub(a, b):\n  return a - b\n"  # re-indented: same tokens
    zh = "小明有12个苹果，他给了妹妹4个，又在商店买了7个。请问小明现在一共有多少个苹果？请写出计算过程。"
    zh_name = zh.replace("小明", "小红")
    tasks = [
        _task("empty", ""),
        _task("one", "Hi"),
        _task("one2", "Ok"),
        _task("huge", huge),
        _task("huge2", huge + " extra"),
        _task("code_a", code_a),
        _task("code_b", code_b),
        _task("zh", zh, created="2026-01-01"),
        _task("zh_name", zh_name, created="2026-01-02"),
        _task("ru", "Сколько будет семь плюс пять, если считать в уме?"),
        _task("ru2", "Сколько будет девять минус два, если считать на бумаге?"),
    ]
    kept, dropped = _run(tasks)
    assert set(dropped) == {"huge2", "code_b", "zh_name"}
    assert json.loads(dropped["code_b"]["drop_detail"])["similarity"] == 1.0  # indentation is not content
    assert {"empty", "one", "one2", "ru", "ru2"} <= set(kept)
    # A one-word prompt is a single shingle: it can only match its equal.
    assert len(shingle_hashes("hi")) == 1 and jaccard("hi", "ok") == 0.0
    assert signature(shingle_hashes(normalize_text(huge)), 100, 1).shape == (100,)


def test_band_keys_are_stable_and_identical_text_collides_in_every_band():
    a, b = task_bands(_task("x", BASE), P), task_bands(_task("y", "  " + BASE.upper()), P)
    assert a == b and len(a) == P.bands
    assert a == task_bands(_task("x", BASE), MinHashParams())  # no process-dependent hashing


def test_big_bucket_pairs_stay_linear_and_skip_pool_pool():
    members = [f"n{i:03d}" for i in range(100)]
    pairs = list(bucket_pairs(members, max_bucket_pairs=32))
    assert len(pairs) == 99 + 98 == len(set(pairs))
    pool_members = ["t1", "pool\x1fa", "pool\x1fb"]
    assert sorted(bucket_pairs(pool_members)) == [("pool\x1fa", "t1"), ("pool\x1fb", "t1")]
    assert list(bucket_pairs(["t2", "pool\x1fa", "t1"], within=False)) == [("pool\x1fa", "t1"), ("pool\x1fa", "t2")]


def test_unconfirmed_candidates_are_kept():
    t1, t2 = _task("t1", "Calculate 1 + 8."), _task("t2", "Calculate 1 + 9.")
    out = list(resolve_component([t1, t2], [], [("v\x1ft1", "v\x1ft2")], P, 0.7))
    assert [tag for tag, _ in out] == ["kept", "kept"]


def _sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture()
def pool_file(tmp_path):
    f = tmp_path / "last_quarter.jsonl"
    rows = [
        {"task_id": "Q-1", "source": "q3", "domain": "math", "prompt": BASE, "answer": "18"},
        {"task_id": "Q-2", "source": "q3", "domain": "math", "prompt": TEMPLATED[0], "answer": "42"},
        # a pool duplicate of Q-1: the pool is not deduplicated against itself
        {"task_id": "Q-3", "source": "q3", "domain": "math", "prompt": VARIANTS["name"], "answer": "18"},
        {"task_id": "Q-4", "source": "q3", "domain": "math"},
    ]  # no prompt: unusable, skipped
    f.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return f


def test_against_pool_drops_exact_and_near_copies_and_never_touches_the_pool(tmp_path, pool_file):
    before = _sha(pool_file)
    meta = build_index([str(pool_file)], P, tmp_path / "idx")
    assert meta["rows"] == 3 and meta["unusable"] == 1
    tasks = [
        _task("exact", "  " + TEMPLATED[0].upper(), answer="42"),
        _task("near", VARIANTS["added_sentence"]),
        _task("fresh", TEMPLATED[1]),
        _task("fresh2", TEMPLATED[2]),
    ]
    kept, dropped = _run(tasks, str(tmp_path / "idx"))
    assert kept == ["fresh", "fresh2"]
    ex, nr = json.loads(dropped["exact"]["drop_detail"]), json.loads(dropped["near"]["drop_detail"])
    assert dropped["exact"]["drop_stage"] == "against_pool" and dropped["exact"]["drop_reason"] == "dedup_against_pool"
    assert ex["match"] == "exact" and ex["pool_task_id"] == "Q-2" and ex["similarity"] == 1.0
    assert (
        nr["match"] == "near" and nr["pool_task_id"] == "Q-1" and nr["pool_source"] == "q3" and nr["similarity"] >= 0.7
    )
    assert nr["pool"].endswith("last_quarter.jsonl")
    assert _sha(pool_file) == before


def test_pool_only_mode_keeps_near_duplicates_within_the_inputs(tmp_path, pool_file):
    build_index([str(pool_file)], P, tmp_path / "idx")
    tasks = [
        _task("a", TEMPLATED[1], created="2026-01-01"),
        _task("b", TEMPLATED[1] + " Show your work.", created="2026-01-02"),
        _task("c", VARIANTS["number"]),
    ]
    kept, dropped = _run(tasks, str(tmp_path / "idx"), within=False)
    assert kept == ["a", "b"] and set(dropped) == {"c"}


def test_reused_index_gives_the_same_drops_as_a_rebuilt_one(tmp_path, pool_file):
    build_index([str(pool_file)], P, tmp_path / "saved")
    tasks = [_task(k, v, line=i) for i, (k, v) in enumerate(VARIANTS.items())] + [_task("fresh", TEMPLATED[1])]
    first = _run(tasks, str(tmp_path / "saved"))
    build_index([str(pool_file)], P, tmp_path / "rebuilt")
    second = _run(tasks, str(tmp_path / "rebuilt"))
    reused = _run(tasks, str(tmp_path / "saved"))
    assert first[0] == second[0] == reused[0] == ["fresh"]
    assert (
        {k: v["drop_detail"] for k, v in first[1].items()}
        == {k: v["drop_detail"] for k, v in second[1].items()}
        == {k: v["drop_detail"] for k, v in reused[1].items()}
    )


def test_index_built_with_other_parameters_is_refused(tmp_path, pool_file):
    build_index([str(pool_file)], P, tmp_path / "idx")
    with pytest.raises(PoolIndexError, match="was built with"):
        load_meta(tmp_path / "idx", MinHashParams(shingle="word", size=5))
    (tmp_path / "notidx").mkdir()
    (tmp_path / "notidx" / "x.txt").write_text("mine")
    with pytest.raises(PoolIndexError, match="not a tasksieve pool index"):
        build_index([str(pool_file)], P, tmp_path / "notidx")


def test_judge_edges_refuses_exactly_what_judging_each_edge_refuses(monkeypatch):
    """judge_edges skips the per-edge call for candidates below the
    threshold that are not exact copies, and judge_ranked (the batch path's
    edge shards: edges as index arrays) refuses those far under it on
    arrays: the confirmed edges of both must be those _judge_edge confirms
    one by one, on copies, edits, refilled templates and unrelated texts,
    at thresholds on and around their similarities, in blocks of any size."""
    import random

    from tasksieve.transforms.dedup import near_judge as near_mod
    from tasksieve.transforms.dedup.near_judge import Component, _judge_edge, judge_edges, judge_ranked
    from tasksieve.transforms.same_problem.rules import Rules

    rng = random.Random(5)
    words = "the train leaves at 9 and 12 sums of 40 odd primes find total cost 7 each step".split()
    base = [" ".join(rng.choice(words) for _ in range(rng.randint(4, 30))) for _ in range(12)]
    tasks, n = [], 0
    for b in base:
        for variant in (b, b + " 3", b.replace("9", "8"), b, " ".join(reversed(b.split()))):
            n += 1
            tasks.append(
                with_hash(
                    {"task_id": f"t{n}", "source": "s", "prompt": variant, "answer": str(n % 3), "domain": "math"}
                )
            )
    # A hash shared by unlike texts: judged a copy on its hash alone, whatever its shingles say.
    tasks.append(
        dict(
            with_hash({"task_id": "alias", "source": "s", "prompt": "zq xv", "answer": "1", "domain": "math"}),
            content_hash=tasks[0]["content_hash"],
        )
    )
    nodes = [f"s\x1f{t['task_id']}" for t in tasks]
    edges = sorted({tuple(sorted(rng.sample(nodes, 2))) for _ in range(600)} | {tuple(sorted((nodes[0], nodes[-1])))})
    c = Component(tasks, [], MinHashParams())
    sims = dict(zip(edges, c.sh.sims(edges)))
    for threshold in [0.5, 0.8, *rng.sample(sorted(set(sims.values())), 5)]:
        want = []
        for e in edges:
            how, s = _judge_edge(c, e, sims[e], threshold, 0.5, 0.9, Rules())
            if how is not None:
                want.append((e, how, s))
        got = judge_edges(c, edges, threshold, 0.5, 0.9, Rules())
        assert got == want, threshold
        names = sorted({n for e in edges for n in e})
        rank = {n: i for i, n in enumerate(names)}
        lo, hi = (np.array([rank[e[i]] for e in edges], dtype=np.int64) for i in (0, 1))
        for block in (250_000, 7, 1):
            monkeypatch.setattr(near_mod, "_EDGE_BLOCK", block)
            assert judge_ranked(c, names, lo, hi, threshold, 0.5, 0.9, Rules()) == want, (threshold, block)
        # Nodes in any order, edges either way round (the edge shards' id order): the same edges, lower node first.
        shuffled = rng.sample(names, len(names))
        at = {n: i for i, n in enumerate(shuffled)}
        turned = [e[::-1] if rng.random() < 0.5 else e for e in edges]
        lo, hi = (np.array([at[e[i]] for e in turned], dtype=np.int64) for i in (0, 1))
        assert judge_ranked(c, shuffled, lo, hi, threshold, 0.5, 0.9, Rules()) == want, threshold
        assert any(sims[e] < threshold for e in edges) and want  # some refused below it, some confirmed
