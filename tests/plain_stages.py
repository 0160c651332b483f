"""The reference the batch engine (transforms/batch/) is tested against:
read .. decontaminate as the stage packages' Beam-free functions, in one
process, one row at a time (read_source, validate_row, first_by_position,
with_hash, pick_survivor, find_near_duplicates, check_task), the functions
`tasksieve validate` judges a delivery with. `reference_outputs` gives the
results, quarantine and expert cost rows `tasksieve dedup` must write, in
the order and with the columns of its Parquet files, less the run id."""

from __future__ import annotations

from collections import defaultdict

import pyarrow as pa

from tasksieve.pipeline.outputs.finalize import SORT_KEYS
from tasksieve.pipeline.run.graph import quarantine_result
from tasksieve.schemas.config import RunConfig
from tasksieve.schemas.rates import load_rates
from tasksieve.schemas.records import COST_SCHEMA, QUARANTINE_SCHEMA, RESULT_SCHEMA
from tasksieve.transforms.costs import expert_cost_row
from tasksieve.transforms.decontam.index import get_index, index_spec
from tasksieve.transforms.decontam.stage import check_task
from tasksieve.transforms.dedup.exact import pick_survivor
from tasksieve.transforms.dedup.minhash import params_from_config
from tasksieve.transforms.dedup.near import find_near_duplicates
from tasksieve.transforms.dedup.near_rule import near_options
from tasksieve.transforms.dedup.pool_index import pool_rows
from tasksieve.transforms.normalize import with_hash
from tasksieve.transforms.read import expand_inputs, read_source
from tasksieve.transforms.stage import DROPPED, KEPT
from tasksieve.transforms.validate import first_by_position, quarantine_row, repeat_entry, validate_row

RUN_ID = "reference"


def read_and_validate(inputs: list[str], cfg: RunConfig) -> tuple[list[dict], list[dict]]:
    """(valid tasks, each with its content hash, quarantine entries): rows
    that cannot be read or break the contract, and later rows of a
    repeated (source, task_id)."""
    lim = cfg.limits
    tasks, quarantine = [], []
    for path in expand_inputs(inputs):
        for raw in read_source(path, lim.max_row_bytes):
            task, reason = validate_row(raw, lim.max_field_chars, lim.max_expert_minutes, lim.max_expert_cost_usd)
            if task is None:
                quarantine.append(quarantine_row(raw, reason))
            else:
                tasks.append(task)
    by_id: dict = defaultdict(list)
    for t in tasks:
        by_id[(t["source"], t["task_id"])].append(t)
    unique = []
    for group in by_id.values():
        first, rest = first_by_position(group)
        unique.append(with_hash(first))
        quarantine += [repeat_entry(first, t) for t in rest]
    return unique, quarantine


def exact_dedup(tasks: list[dict]) -> tuple[list[dict], list[dict]]:
    """(survivors, dropped copies): one task per content hash."""
    by_hash: dict = defaultdict(list)
    for t in tasks:
        by_hash[t["content_hash"]].append(t)
    kept, dropped = [], []
    for group in by_hash.values():
        keep, copies = pick_survivor(group)
        kept.append(keep)
        dropped += copies
    return kept, dropped


def near_dedup(tasks: list[dict], cfg: RunConfig, against: list[str]) -> tuple[list[dict], list[dict]]:
    """(kept, dropped) of near dedup within the tasks and against the pools."""
    if not (cfg.dedup.near or against):
        return tasks, []
    params = params_from_config(cfg.dedup)
    pool = list(pool_rows(list(against), params)) if against else []
    opts = near_options(cfg.dedup, cfg.decontam)
    kept, dropped = [], []
    for tag, row in find_near_duplicates(
        tasks,
        pool,
        params,
        cfg.dedup.threshold,
        opts["min_numbers"],
        opts["guard_below"],
        opts["semantic"],
        opts["rules"],
        within=opts["within"],
        max_bucket_pairs=opts["max_bucket_pairs"],
        keep_variants=opts["keep_variants"],
    ):
        assert tag in (KEPT, DROPPED), tag
        (kept if tag == KEPT else dropped).append(row)
    return kept, dropped


def decontaminate(tasks: list[dict], cfg: RunConfig) -> tuple[list[dict], list[dict]]:
    n, benchmarks, extra, checks = index_spec(cfg.decontam)
    index = get_index(n, list(benchmarks), list(extra), **checks)
    clean, contaminated = [], []
    for t in tasks:
        d = check_task(t, index)
        if d is None:
            clean.append(t)
        else:
            contaminated.append(d)
    return clean, contaminated


def _table(rows: list[dict], schema: pa.Schema, name: str) -> list[dict]:
    t = pa.Table.from_pylist(rows, schema=schema).sort_by(SORT_KEYS[name])
    return t.drop_columns(["run_id"]).to_pylist()


def reference_outputs(inputs, cfg: RunConfig, against=(), rates_path=None) -> dict[str, list[dict]]:
    """{"results", "quarantine", "costs"}: `tasksieve dedup`'s tables."""
    tasks, quarantine = read_and_validate([str(i) for i in inputs], cfg)
    tasks, exact = exact_dedup(tasks)
    tasks, near = near_dedup(tasks, cfg, [str(a) for a in against])
    clean, contaminated = decontaminate(tasks, cfg)
    priced = [dict(t, status="kept") for t in clean] + [dict(t, status="dropped") for t in exact + near + contaminated]
    results = [dict(t, run_id=RUN_ID) for t in priced] + [quarantine_result(q, RUN_ID) for q in quarantine]
    rates = load_rates(rates_path)
    return {
        "results": _table(results, RESULT_SCHEMA, "results"),
        "quarantine": _table([dict(q, run_id=RUN_ID) for q in quarantine], QUARANTINE_SCHEMA, "quarantine"),
        "costs": _table([expert_cost_row(t, rates, RUN_ID) for t in priced], COST_SCHEMA, "costs"),
    }
