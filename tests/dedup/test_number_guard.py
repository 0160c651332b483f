"""The number guard on arrays (transforms/dedup/number_guard.py) refuses
exactly the candidate pairs the guard refuses one by one: its shared counts
are Counter intersections, it refuses only pairs whose overlap is surely
under the minimum, and near dedup confirms the same edges with it and
without it, on the list path (judge_edges), the array path (judge_ranked)
and end to end on a delivery made from templates."""

import json
import random
from collections import Counter

import numpy as np
import pyarrow.parquet as pq
import pytest

from tasksieve.transforms.dedup import near_judge as near
from tasksieve.transforms.dedup import number_guard
from tasksieve.transforms.dedup.minhash import MinHashParams
from tasksieve.transforms.dedup.near_judge import Component, task_node
from tasksieve.transforms.dedup.near_rule import FAR_UNDER, counts_overlap
from tasksieve.transforms.normalize import content_hash
from tasksieve.transforms.same_problem.rules import Rules

_TEMPLATES = [
    "A farmer has {} apples and {} oranges in {} baskets. He sells {} apples on Monday. How many are left?",
    "Compute {} + {} - {} and multiply the result by {}, then add {}.",
    "A train leaves at {} km/h and another at {} km/h, {} km apart; they meet after {} hours and {} minutes.",
    "Priya buys {} pens at ${} each and {} books at ${} each. She pays with ${}. What is her change?",
]

# Long shared wording, as generated tasks have: siblings are near-identical
# text, and only their numbers tell them apart.
_CONTEXT = (
    " Show every step of your reasoning, state the units of each intermediate quantity, and give the"
    " final answer as a single number on the last line, without any other words after it."
)


def _numbered_text(rng: random.Random) -> str:
    """Text with numbers drawn from a small set: repeats within a text and
    across texts, decimals, thousands, Unicode digits, or none at all."""
    pool = ["1", "2", "3", "10", "1,000", "2.5", "2.50", "١٢", "007", "99"]
    words = []
    for _ in range(rng.randint(0, 12)):
        words.append(rng.choice(pool) if rng.random() < 0.6 else rng.choice(["apples", "x", "and", "more"]))
    return " ".join(words)


def test_shared_numbers_are_the_counter_intersections(monkeypatch):
    """Over random pairs (a text with itself, texts without numbers, one
    number many times, slices of a few look-ups): the shared count is
    sum((Counter(a) & Counter(b)).values()), and a refused pair is one the
    guard refuses, whatever the rounding: under min_numbers by more than
    the margin, never less. Each text's distinct numbers are coded once,
    with their counts."""
    rng = random.Random(11)
    texts = [_numbered_text(rng) for _ in range(400)] + ["", "no numbers here", " ".join(["7"] * 300), "7 7 8"]
    ea = np.array([rng.randrange(len(texts)) for _ in range(5000)] + [400, 402, 402, 403], dtype=np.int64)
    eb = np.array([rng.randrange(len(texts)) for _ in range(5000)] + [401, 402, 403, 402], dtype=np.int64)
    counts = [Counter(number_guard.numbers_in(t)) for t in texts]
    want = [sum((counts[a] & counts[b]).values()) for a, b in zip(ea.tolist(), eb.tolist())]
    offsets, codes, times = number_guard.number_codes(counts)
    # One code per distinct number of a text, with its count: the work per
    # pair is its distinct numbers, as with Counter's `&` (text 402 repeats
    # "7" 300 times: one code).
    assert np.diff(offsets).tolist() == [len(c) for c in counts]
    assert times.sum() == sum(sum(c.values()) for c in counts)
    for piece in (1 << 22, 7, 1):  # one slice; many; one pair per slice
        monkeypatch.setattr(number_guard, "_SLICE", piece)
        assert number_guard.shared_numbers(offsets, codes, times, ea, eb).tolist() == want, piece
    refused_any = 0
    for min_numbers in (0.2, 0.5, 0.51, 0.75, 1.0):
        refused = number_guard.refused_by_numbers(lambda i: counts[i], ea, eb, min_numbers, FAR_UNDER)
        for k, (a, b) in enumerate(zip(ea.tolist(), eb.tolist())):
            overlap = counts_overlap(counts[a], counts[b])
            if refused[k]:
                assert overlap < min_numbers, (texts[a], texts[b], min_numbers)
                refused_any += 1
            elif overlap < min_numbers:  # left to the one-by-one guard: only where rounding could matter
                assert overlap >= min_numbers - FAR_UNDER - 1e-4, (texts[a], texts[b], min_numbers)
    assert refused_any > 2000  # the guard refuses many of these pairs, not none


def _templated_tasks(seed: int, n: int) -> list[dict]:
    """Tasks filled from a few templates: siblings (other numbers, other
    answer), copies with one or three numbers edited (same answer: the
    guard, not the answer, decides them), exact copies, and copies with
    their numbers shuffled (the same numbers, another answer)."""
    rng = random.Random(seed)
    tasks = []
    for i in range(n):
        if tasks and rng.random() < 0.3:
            base = rng.choice(tasks)
            nums = list(base["nums"])
            kind = rng.choice(["edit", "edit3", "copy", "shuffle"])
            for k in rng.sample(range(len(nums)), {"edit": 1, "edit3": 3}.get(kind, 0)):
                nums[k] = rng.randint(1, 999)
            if kind == "shuffle":
                rng.shuffle(nums)
            t = {"tpl": base["tpl"], "nums": nums, "answer": base["answer"] if kind != "shuffle" else str(i)}
        else:
            t = {
                "tpl": rng.randrange(len(_TEMPLATES)),
                "nums": [rng.randint(1, 999) for _ in range(5)],
                "answer": str(rng.randint(1, 5000)),
            }
        t.update(
            task_id=f"t{i:05d}",
            source="vendor",
            domain="math",
            prompt=_TEMPLATES[t["tpl"]].format(*t["nums"]) + _CONTEXT,
        )
        t["content_hash"] = content_hash(t)
        tasks.append(t)
    return tasks


def _judged(monkeypatch, enabled: bool, fn, *args):
    monkeypatch.setattr(number_guard, "enabled", enabled)
    calls = []
    real = near._judge_edge
    monkeypatch.setattr(near, "_judge_edge", lambda *a: calls.append(1) or real(*a))
    out = fn(*args)
    monkeypatch.setattr(near, "_judge_edge", real)
    return out, len(calls)


@pytest.mark.parametrize(
    "threshold,min_numbers,guard_below",
    [(0.7, 0.5, 0.9), (0.5, 0.75, 0.95), (0.85, 0.5, 0.9), (0.7, 0.0, 0.9), (0.7, 1.0, 1.0), (0.7, 0.5, 0.6)],
)
def test_the_same_edges_are_confirmed_with_and_without_the_array_guard(
    monkeypatch, threshold, min_numbers, guard_below
):
    """judge_edges and judge_ranked on every pair of 160 templated tasks
    (and in blocks of 900 edges): the same confirmed edges, in the same
    order, with the array guard on and off; with it on, far fewer pairs
    reach the one-by-one judgement wherever the guard can refuse."""
    p = MinHashParams()
    tasks = _templated_tasks(5, 160)
    c = Component(tasks, [], p)
    names = sorted(task_node(t) for t in tasks)
    pairs = [(i, j) for i in range(len(names)) for j in range(i + 1, len(names))]
    lo = np.array([i for i, _ in pairs], dtype=np.int64)
    hi = np.array([j for _, j in pairs], dtype=np.int64)
    edges = [(names[i], names[j]) for i, j in pairs]
    monkeypatch.setattr(near, "_EDGE_BLOCK", 900)
    rules = Rules()
    args = (threshold, min_numbers, guard_below, rules)
    ranked_on, calls_on = _judged(monkeypatch, True, near.judge_ranked, c, names, lo, hi, *args)
    ranked_off, calls_off = _judged(
        monkeypatch, False, near.judge_ranked, Component(tasks, [], p), names, lo, hi, *args
    )
    assert ranked_on == ranked_off
    listed_on, _ = _judged(monkeypatch, True, near.judge_edges, Component(tasks, [], p), edges, *args)
    listed_off, _ = _judged(monkeypatch, False, near.judge_edges, Component(tasks, [], p), edges, *args)
    assert listed_on == listed_off == ranked_on
    assert ranked_on  # copies are confirmed
    if min_numbers > 0 and guard_below > threshold:
        assert calls_on < calls_off, (calls_on, calls_off)  # the guard refused siblings on arrays
        if (threshold, guard_below) == (0.7, 0.9):  # the defaults: siblings span the guarded band
            assert calls_on * 10 < calls_off, (calls_on, calls_off)
    else:
        assert calls_on == calls_off  # nothing for the guard to refuse: every close pair judged one by one


@pytest.mark.slow
def test_a_templated_delivery_keeps_its_decisions_with_the_array_guard(monkeypatch, tmp_path):
    """`tasksieve dedup` on 1,500 templated tasks, on the batch path with
    the array guard and without it, and the stages' plain functions
    (tests/plain_stages.py): the same results.parquet, every column but
    the run id."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from plain_stages import reference_outputs

    from tasksieve.pipeline.cli import main
    from tasksieve.schemas.config import load_config

    tasks = _templated_tasks(8, 1500)
    delivery = tmp_path / "delivery.jsonl"
    keep = ("task_id", "source", "domain", "prompt", "answer")
    delivery.write_text("".join(json.dumps({k: t[k] for k in keep}) + "\n" for t in tasks))
    cfg = tmp_path / "cfg.toml"
    cfg.write_text("[dedup]\nsemantic = false\n[decontam]\nbenchmarks = []\n")
    results = {}
    for name, enabled in (("on", True), ("off", False)):
        monkeypatch.setattr(number_guard, "enabled", enabled)
        assert main(["dedup", "--input", str(delivery), "--out", str(tmp_path / name), "--config", str(cfg)]) == 0
        results[name] = pq.read_table(tmp_path / name / "results.parquet").drop_columns(["run_id"]).to_pylist()
    monkeypatch.setattr(number_guard, "enabled", True)
    results["ref"] = reference_outputs([delivery], load_config(cfg))["results"]
    assert any(r["status"] == "dropped" for r in results["ref"])
    assert results["on"] == results["off"] == results["ref"]
    dropped = [r for r in results["on"] if r["status"] == "dropped"]
    assert 100 < len(dropped) < 1000  # copies dropped, siblings kept
