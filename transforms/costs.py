"""Cost rows: every dollar a run accounts for, one row per (task or
attempt, component), priced from the rates table (schemas/rates.py).

- expert: every task that entered the funnel (kept or dropped), from the
  task's own `expert_cost_usd`, else `expert_minutes` x the source's hourly
  rate; a task with neither gets a zero row with unit `unpriced`, so it is
  counted, never silently free. Quarantined rows are not priced: their
  fields cannot be trusted.
- generation: per attempt, by the model's rate: prompt and completion
  tokens x $/M tokens, or measured engine seconds x $/GPU-hour.
- verification: per attempt, measured verifier seconds x $/CPU-hour.
- judge: per rubric attempt, the judge's prompt and completion tokens (or
  engine seconds) at the judge model's generation rate.

A generation re-used from the attempt cache was paid for by the finished
run named in `reused_from_run`: its generation row here is $0 with unit
`reused` (quantity still the tokens or seconds), so no generation is paid
twice. One adopted from a run that never finished is charged here. A
replayed attempt (backend `replay`) was paid for elsewhere: $0 too. (The
judge is not cached: a resumed run judges its rubric attempts again.)
"""

from __future__ import annotations

import apache_beam as beam
import pyarrow as pa
import pyarrow.compute as pc

from tasksieve.transforms.backends.base import REPLAY_PREFIX


def expert_cost_row(task: dict, rates, run_id: str) -> dict:
    base = {
        "run_id": run_id,
        "content_hash": task.get("content_hash"),
        "source": task["source"],
        "task_id": task["task_id"],
        "component": "expert",
        "attempt_idx": None,
    }
    if task.get("expert_cost_usd") is not None:
        return dict(base, quantity=task["expert_cost_usd"], unit="usd", usd=task["expert_cost_usd"])
    if task.get("expert_minutes") is not None:
        minutes = task["expert_minutes"]
        return dict(
            base, quantity=minutes, unit="expert_minute", usd=minutes / 60.0 * rates.expert.hourly(task["source"])
        )
    return dict(base, quantity=0.0, unit="unpriced", usd=0.0)


def expert_cost_table(results: pa.Table, rates, run_id: str, schema: pa.Schema) -> pa.Table:
    """expert_cost_row of every row of `results` (task columns: source,
    task_id, content_hash, expert_cost_usd, expert_minutes), as one table
    with `schema`'s columns, computed on the columns: the batch path writes
    a chunk's results as a table already, and building a dict per task only
    to pack it into columns again was most of a chunk's cost rows. The same
    values: the given cost wins, else minutes / 60 * the source's hourly
    rate, in that order of operations, else an `unpriced` zero
    (tests/verify/test_verify_costs.py compares both on every kind of task)."""
    n = results.num_rows
    given, minutes, source = results["expert_cost_usd"], results["expert_minutes"], results["source"]
    has_usd = pc.is_valid(given)
    has_minutes = pc.and_(pc.invert(has_usd), pc.is_valid(minutes))
    sources = pc.unique(source)  # a few per delivery: each one's rate looked up once
    hourly = pa.array([rates.expert.hourly(s) for s in sources.to_pylist()], pa.float64())
    by_minutes = pc.multiply(pc.divide(minutes, 60.0), pc.take(hourly, pc.index_in(source, sources)))
    zero = pa.scalar(0.0)
    columns = {
        "run_id": pa.repeat(pa.scalar(run_id, pa.string()), n),
        "content_hash": results["content_hash"],
        "source": source,
        "task_id": results["task_id"],
        "component": pa.repeat(pa.scalar("expert", pa.string()), n),
        "quantity": pc.if_else(has_usd, given, pc.if_else(has_minutes, minutes, zero)),
        "unit": pc.if_else(has_usd, "usd", pc.if_else(has_minutes, "expert_minute", "unpriced")),
        "usd": pc.if_else(has_usd, given, pc.if_else(has_minutes, by_minutes, zero)),
        "attempt_idx": pa.nulls(n, pa.int64()),
    }
    return pa.table([columns[f.name] for f in schema], schema=schema)


def attempt_cost_rows(
    attempt: dict, task_key: tuple[str, str], rates, run_id: str, finished_runs: frozenset = frozenset()
) -> list[dict]:
    source, task_id = task_key
    base = {
        "run_id": run_id,
        "content_hash": attempt["content_hash"],
        "source": source,
        "task_id": task_id,
        "attempt_idx": attempt["attempt_idx"],
    }
    model_rate = rates.for_model(attempt["model_id"])
    gen_usd, gen_qty, gen_unit = model_rate.usd(
        attempt["prompt_tokens"] or 0, attempt["completion_tokens"] or 0, attempt["gen_seconds"] or 0.0
    )
    origin = attempt.get("reused_from_run")
    if origin is not None and (origin in finished_runs or origin.startswith(REPLAY_PREFIX)):
        gen_usd, gen_unit = 0.0, "reused"
    vsec = attempt["verify_seconds"] or 0.0
    rows = [
        dict(base, component="generation", quantity=gen_qty, unit=gen_unit, usd=gen_usd),
        dict(
            base,
            component="verification",
            quantity=vsec,
            unit="cpu_second",
            usd=vsec / 3600.0 * rates.verification.usd_per_cpu_hour,
        ),
    ]
    if attempt.get("judge_model_id"):
        usd, qty, unit = rates.for_model(attempt["judge_model_id"]).usd(
            attempt.get("judge_prompt_tokens") or 0,
            attempt.get("judge_completion_tokens") or 0,
            attempt.get("judge_seconds") or 0.0,
        )
        rows.append(dict(base, component="judge", quantity=qty, unit=unit, usd=usd))
    return rows


class CostRows(beam.PTransform):
    """(all task results, attempts) in; cost rows out. Attempts meet their
    task through a keyed join on content_hash: after exact dedup, each
    sampled hash belongs to exactly one task."""

    def __init__(self, rates, run_id: str, finished_runs: frozenset = frozenset()):
        super().__init__()
        self.rates = rates
        self.run_id = run_id
        self.finished_runs = finished_runs

    def expand(self, pcolls):
        results, attempts = pcolls
        rates, run_id, finished = self.rates, self.run_id, self.finished_runs
        expert = (
            results
            | "Priced" >> beam.Filter(lambda r: r["status"] != "quarantined")
            | "Expert" >> beam.Map(expert_cost_row, rates, run_id)
        )

        def per_attempt(kv):
            _, grouped = kv
            owners = list(grouped["results"])
            if not owners:
                return
            key = (owners[0]["source"], owners[0]["task_id"])
            for a in grouped["attempts"]:
                yield from attempt_cost_rows(a, key, rates, run_id, finished)

        sampled = (
            {
                "results": results
                | "Sampled" >> beam.Filter(lambda r: bool(r.get("n_attempts")))
                | "ResultByHash" >> beam.Map(lambda r: (r["content_hash"], r)),
                "attempts": attempts | "AttemptByHash" >> beam.Map(lambda a: (a["content_hash"], a)),
            }
            | "JoinAttempts" >> beam.CoGroupByKey()
            | "AttemptCosts" >> beam.FlatMap(per_attempt)
        )
        return (expert, sampled) | "AllCosts" >> beam.Flatten()
