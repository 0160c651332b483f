"""The data contracts as pyarrow schemas.

Field names are docs/design.md's and are the contract with analysts: add fields,
never rename them. Everything downstream (Parquet files, DuckDB tables, the
learnable set) is written with these schemas, so a column never changes type
between runs.
"""

from __future__ import annotations

import pyarrow as pa

DOMAINS = ("math", "code", "rubric", "exact")

# Statuses a task can end in; every input row ends in exactly one of them.
# `kept` only comes from `tasksieve dedup`, which stops before sampling.
STATUSES = ("learnable", "all_pass", "all_fail", "dropped", "quarantined", "kept")

# The funnel's stages, in order. `drop_stage` is always one of these.
STAGES = (
    "read",
    "validate",
    "exact_dedup",
    "near_dedup",
    "against_pool",
    "decontaminate",
    "verifier_sanity",
    "sample",
    "classify",
)

TASK_FIELDS: list[pa.Field] = [
    pa.field("task_id", pa.string()),
    pa.field("source", pa.string()),
    pa.field("batch_id", pa.string()),
    pa.field("domain", pa.string()),
    pa.field("prompt", pa.string()),
    pa.field("answer", pa.string()),
    pa.field("tests", pa.string()),
    pa.field("entry_point", pa.string()),
    pa.field("reference_solution", pa.string()),
    pa.field("rubric", pa.list_(pa.string())),
    # Rubric calibration labels, validated, as JSON text: a list of
    # {"response", "criteria_met": [bool per criterion], "grader"} (transforms/verify/judge/labels.py).
    pa.field("graded_attempts", pa.string()),
    pa.field("expert_minutes", pa.float64()),
    pa.field("expert_cost_usd", pa.float64()),
    pa.field("license", pa.string()),
    pa.field("created_at", pa.string()),
    # Free-form JSON, stored as a JSON string so its shape can vary per row.
    pa.field("meta", pa.string()),
    pa.field("content_hash", pa.string()),
    # Provenance, so a person can find the row in the delivery.
    pa.field("source_file", pa.string()),
    pa.field("line", pa.int64()),
]
TASK_SCHEMA = pa.schema(TASK_FIELDS)

ATTEMPT_SCHEMA = pa.schema(
    [
        pa.field("run_id", pa.string()),
        pa.field("content_hash", pa.string()),
        pa.field("model_id", pa.string()),
        pa.field("sampler_key", pa.string()),
        pa.field("attempt_idx", pa.int64()),
        pa.field("seed", pa.int64()),
        pa.field("completion", pa.string()),
        pa.field("prompt_tokens", pa.int64()),
        pa.field("completion_tokens", pa.int64()),
        pa.field("finish_reason", pa.string()),
        pa.field("gen_seconds", pa.float64()),
        pa.field("extracted_answer", pa.string()),
        pa.field("passed", pa.bool_()),
        pa.field("score", pa.float64()),
        pa.field("verifier", pa.string()),
        pa.field("verify_seconds", pa.float64()),
        pa.field("error", pa.string()),
        # Set when the generation was not made by this run but re-used from the
        # attempt cache: the run that made it (see transforms/sample/attempt_cache.py).
        pa.field("reused_from_run", pa.string()),
        # The rubric judge's own generation (null for other verifiers),
        # priced as component `judge` at the judge model's rate.
        pa.field("judge_model_id", pa.string()),
        pa.field("judge_prompt_tokens", pa.int64()),
        pa.field("judge_completion_tokens", pa.int64()),
        pa.field("judge_seconds", pa.float64()),
    ]
)

RESULT_SCHEMA = pa.schema(
    [pa.field("run_id", pa.string())]
    + TASK_FIELDS
    + [
        pa.field("n_attempts", pa.int64()),
        pa.field("n_pass", pa.int64()),
        pa.field("pass_rate", pa.float64()),
        pa.field("pass_rate_lo", pa.float64()),
        pa.field("pass_rate_hi", pa.float64()),
        pa.field("difficulty", pa.string()),
        pa.field("status", pa.string()),
        pa.field("drop_stage", pa.string()),
        pa.field("drop_reason", pa.string()),
        # JSON object: the evidence (duplicate-of id, benchmark and n-gram...).
        pa.field("drop_detail", pa.string()),
        # For quarantined rows: the raw text as read, so nothing disappears.
        pa.field("raw", pa.string()),
        # Rubric tasks: whether the judge's agreement with people was measured
        # ("measured" / "unmeasured") and its Cohen's kappa (table judge_agreement).
        pa.field("judge_agreement", pa.string()),
        pa.field("judge_kappa", pa.float64()),
    ]
)

# The learnable set: what a trainer loads. Task fields plus the pass statistics.
LEARNABLE_SCHEMA = pa.schema(
    TASK_FIELDS
    + [
        pa.field("n_attempts", pa.int64()),
        pa.field("n_pass", pa.int64()),
        pa.field("pass_rate", pa.float64()),
        pa.field("difficulty", pa.string()),
    ]
)

QUARANTINE_SCHEMA = pa.schema(
    [
        pa.field("run_id", pa.string()),
        pa.field("source", pa.string()),
        pa.field("source_file", pa.string()),
        pa.field("line", pa.int64()),
        pa.field("task_id", pa.string()),
        pa.field("stage", pa.string()),
        pa.field("reason", pa.string()),
        pa.field("raw", pa.string()),
    ]
)

# Cost rows carry (source, task_id) beside content_hash: an exact duplicate
# shares its survivor's hash, and its expert cost must stay attributable.
COST_SCHEMA = pa.schema(
    [
        pa.field("run_id", pa.string()),
        pa.field("content_hash", pa.string()),
        pa.field("source", pa.string()),
        pa.field("task_id", pa.string()),
        pa.field("component", pa.string()),
        pa.field("quantity", pa.float64()),
        pa.field("unit", pa.string()),
        pa.field("usd", pa.float64()),
        pa.field("attempt_idx", pa.int64()),
    ]
)

# One row per finished run (the DuckDB table `runs`).
RUN_SCHEMA = pa.schema(
    [pa.field(n, pa.string()) for n in ("run_id", "started_at", "finished_at")]
    + [pa.field("wall_seconds", pa.float64())]
    + [
        pa.field(n, pa.string())
        for n in (
            "tasksieve_version",
            "runner",
            "inputs",
            "config_path",
            "config",
            "rates",
            "model_id",
            "sampler_key",
            "sampling_mode",
        )
    ]
    + [pa.field("k", pa.int64())]
    # Sampling: attempts made by this run's engine vs re-used from the attempt
    # cache, and the share of the sampling stage spent inside the engine.
    + [
        pa.field("attempts_generated", pa.int64()),
        pa.field("attempts_reused", pa.int64()),
        pa.field("engine_seconds", pa.float64()),
        pa.field("sampling_wall_seconds", pa.float64()),
        pa.field("engine_busy_fraction", pa.float64()),
    ]
    + [pa.field(f"n_{s}", pa.int64()) for s in STATUSES]
    + [
        pa.field("rows_in", pa.int64()),
        pa.field("attempts", pa.int64()),
        pa.field("total_usd", pa.float64()),
        # JSON: the end-of-run summary figures.
        pa.field("figures", pa.string()),
        # JSON list: suspicious settings the run warned about (schemas/config.config_warnings).
        pa.field("warnings", pa.string()),
    ]
)


def conform(row: dict, schema: pa.Schema) -> dict:
    """The row restricted to the schema's fields, missing ones as None."""
    return {name: row.get(name) for name in schema.names}


# What each domain needs so that an attempt can be verified at all.
REQUIRED_BY_DOMAIN = {
    "math": ("answer",),
    "exact": ("answer",),
    "code": ("tests", "entry_point"),
    "rubric": ("rubric",),
}


def declared_domain(rec: dict):
    """The row's domain. A missing or null one (Parquet writes null for a
    column a row does not use) in a row with an answer field is math, so
    the row is then judged as a math task ("math task has no 'answer'")."""
    domain = rec.get("domain")
    if domain is None and "answer" in rec:
        return "math"
    return domain
