"""The run graph: the funnel of docs/design.md as one Beam pipeline.

    read -> validate -> normalize+hash -> exact dedup -> near dedup (+ against
         reference pools) -> decontaminate -> verifier sanity
         -> sample (waves) + verify -> classify -> costs -> staged Arrow files

`tasksieve dedup` is the same graph stopped after decontamination (a spec
without a sampling plan): its survivors are written with status `kept`.
Read .. decontaminate run on chunks of tasks (transforms/batch/stages.py);
their decisions are the stage packages' Beam-free functions' (tested in
tests/batch/ against tests/plain_stages.py).

Every row leaves through exactly one of: results (kept, all_pass/all_fail,
dropped with stage and reason, quarantined with reason). The staged files
are consolidated, sorted and loaded into DuckDB by `finalize.finalize`, after
the pipeline, so the final files are the same whatever runner wrote them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import apache_beam as beam

from tasksieve.schemas.config import RunConfig
from tasksieve.schemas.rates import Rates
from tasksieve.transforms.batch.stages import batch_cheap_stages
from tasksieve.pipeline.outputs.staging import WriteStaged, chunk_name, chunk_table, write_table
from tasksieve.schemas.records import ATTEMPT_SCHEMA, COST_SCHEMA, QUARANTINE_SCHEMA, RESULT_SCHEMA
from tasksieve.transforms.backends.base import Backend
from tasksieve.transforms.costs import CostRows, expert_cost_table
from tasksieve.transforms.batch.chunks import Spill, rows_of
from tasksieve.transforms.sample.stage import SamplePlan
from tasksieve.transforms.sample.transform import SampleAndClassify
from tasksieve.transforms.verify.sanity import VerifierSanity

# The staged outputs and their schemas; `finalize.finalize` reads them back.
STAGED = {"results": RESULT_SCHEMA, "attempts": ATTEMPT_SCHEMA, "quarantine": QUARANTINE_SCHEMA, "costs": COST_SCHEMA}


@dataclass(frozen=True)
class RunSpec:
    run_id: str
    inputs: list
    staging_dir: str
    config: RunConfig
    plan: SamplePlan
    rates: Rates
    # The attempt cache as it was when the run started (attempt_cache.py).
    cache_files: tuple = ()
    finished_runs: frozenset = frozenset()

    @property
    def stats_dir(self) -> str:
        return str(Path(self.staging_dir) / SAMPLING_STATS_DIR)

    # Saved reference-pool indexes (`--dedup-against`), built before the run.
    pool_indexes: tuple = ()
    # Where the batch path keeps its chunks between stages (chunks.py); None: in memory.
    spill: Spill | None = None


def quarantine_result(q: dict, run_id: str) -> dict:
    return {
        "run_id": run_id,
        "source": q["source"],
        "source_file": q["source_file"],
        "line": q["line"],
        "task_id": q.get("task_id"),
        "status": "quarantined",
        "drop_stage": q["stage"],
        "drop_reason": q["reason"],
        "raw": q["raw"],
    }


def dropped_result(task: dict, run_id: str) -> dict:
    return dict(task, run_id=run_id, status="dropped")


ROWS_READ_FILE = "rows_read.txt"
ROWS_COUNTED_FILE = "rows_counted.txt"
SAMPLING_STATS_DIR = "sampling_stats"


def _write(pcoll, name: str, staging_dir: str):
    return pcoll | f"Write{name}" >> WriteStaged(str(Path(staging_dir) / name), STAGED[name])


def build(
    p: beam.Pipeline,
    spec: RunSpec,
    backend_factory: Callable[[], Backend] | None = None,
    judge_factory: Callable[[], Backend] | None = None,
) -> None:
    """The funnel, stage by stage. `judge_factory` gives the rubric judge
    (None: the sampler judges). Without `spec.plan` the graph stops after
    decontamination (`tasksieve dedup`)."""
    cfg = spec.config
    chunks, dropped_chunks, quarantined, rows_read = batch_cheap_stages(p, spec, ROWS_COUNTED_FILE, ROWS_READ_FILE)
    result_chunks = (
        tuple(dropped_chunks)
        | "AllDroppedChunks" >> beam.Flatten()
        | "DroppedResults" >> beam.Map(_with_status, "dropped")
    )
    if spec.plan is None:
        kept = chunks | "KeptResults" >> beam.Map(_with_status, "kept")
        result_chunks = (kept, result_chunks) | "ResultChunks" >> beam.Flatten()
        _write_outputs(p, spec, None, [], quarantined, None, rows_read, result_chunks)
        return
    tasks = chunks | "Unchunk" >> beam.FlatMap(rows_of)
    # Before any attempt is paid for: drop tasks whose verifier is broken.
    tasks, broken = tasks | "VerifierSanity" >> VerifierSanity(cfg.verify, cfg.sampling.groups)
    classified, attempts, unsampled = tasks | "Sample" >> SampleAndClassify(
        spec.plan,
        backend_factory,
        cfg.sampling.tasks_per_batch,
        cfg.sampling.groups,
        spec.cache_files,
        spec.finished_runs,
        spec.stats_dir,
        judge_factory,
    )
    _write_outputs(p, spec, classified, [broken, unsampled], quarantined, attempts, rows_read, result_chunks)


def _write_outputs(
    p: beam.Pipeline, spec: RunSpec, kept, dropped_parts: list, quarantined, attempts, rows_read, result_chunks=None
) -> None:
    """Results, attempts (None: `dedup`, which writes none), quarantine and
    costs, staged; one terminal step depends on every sink. `result_chunks`:
    (status, chunk of results) pairs (the batch path, chunks.as_chunk), written and priced
    a chunk at a time instead of a row at a time."""
    run_id = spec.run_id
    quarantined = quarantined | "StampRun" >> beam.Map(lambda q, run_id: dict(q, run_id=run_id), run_id)
    dropped = (
        tuple(dropped_parts or [p | "NoDropped" >> beam.Create([])])
        | "AllDropped" >> beam.Flatten()
        | "DroppedResult" >> beam.Map(dropped_result, run_id)
    )
    q_results = quarantined | "QuarantineResult" >> beam.Map(quarantine_result, run_id)
    results = (*([kept] if kept is not None else []), dropped, q_results) | "AllResults" >> beam.Flatten()
    priced_attempts = attempts if attempts is not None else p | "NoAttempts" >> beam.Create([])
    costs = (results, priced_attempts) | "Costs" >> CostRows(spec.rates, run_id, spec.finished_runs)
    written = [_write(results, "results", spec.staging_dir)]
    if result_chunks is not None:
        written += _write_chunks(result_chunks, spec)
    if attempts is not None:
        written.append(_write(attempts, "attempts", spec.staging_dir))
    written += [
        _write(quarantined, "quarantine", spec.staging_dir),
        _write(costs, "costs", spec.staging_dir),
        rows_read,
    ]
    # One terminal step that depends on every sink. Beam 2.77's DaskRunner
    # computes only the graph behind the last transform applied; ending on
    # this join makes it run every write (other runners are unaffected).
    _ = tuple(written) | "AllWritten" >> beam.Flatten() | "Done" >> beam.combiners.Count.Globally()


def _with_status(chunk, status: str) -> tuple:
    """(status, chunk): the status its rows are written with (_write_result_chunk),
    stamped as they are written, so the rows are not read and packed once more."""
    return status, chunk


def _write_chunks(result_chunks, spec: RunSpec) -> list:
    """Results (none sampled, none quarantined) and their expert cost rows,
    one staged file of each per chunk."""
    return [
        result_chunks
        | "WriteResultChunks" >> beam.Map(_write_result_chunk, str(Path(spec.staging_dir)), spec.rates, spec.run_id)
    ]


def _write_result_chunk(status_chunk: tuple, staging: str, rates, run_id: str) -> str:
    status, chunk = status_chunk
    tasks = rows_of(chunk)
    results = chunk_table(tasks, STAGED["results"], same={"run_id": run_id, "status": status})
    name = chunk_name(results)  # one name for both files: they hold the same tasks
    write_table(expert_cost_table(results, rates, run_id, STAGED["costs"]), str(Path(staging) / "costs"), name)
    return write_table(results, str(Path(staging) / "results"), name)
