"""The run graph: the funnel of DESIGN.md as one Beam pipeline.

    read -> validate -> normalise+hash -> exact dedup -> decontaminate
         -> verifier sanity -> sample (waves) + verify -> classify -> costs -> staged Parquet

Every row leaves through exactly one of: results (kept, all_pass/all_fail,
dropped with stage and reason, quarantined with reason). The staged files
are consolidated, sorted and loaded into DuckDB by `outputs.finalize`, after
the pipeline, so the final files are the same whatever runner wrote them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import apache_beam as beam

from tasksieve.schemas.config import RunConfig
from tasksieve.schemas.rates import Rates
from tasksieve.pipeline.staging import WriteStaged, write_count
from tasksieve.schemas.records import ATTEMPT_SCHEMA, COST_SCHEMA, QUARANTINE_SCHEMA, RESULT_SCHEMA
from tasksieve.transforms.backends import Backend
from tasksieve.transforms.costs import CostRows
from tasksieve.transforms.decontaminate import Decontaminate
from tasksieve.transforms.dedup_exact import DropExactDuplicates
from tasksieve.transforms.normalize import NormalizeAndHash
from tasksieve.transforms.read import ReadDeliveries
from tasksieve.transforms.sample import SampleAndClassify, SamplePlan
from tasksieve.transforms.verifier_sanity import VerifierSanity
from tasksieve.transforms.validate import ValidateRows

# The staged outputs and their schemas; `outputs.finalize` reads them back.
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


def quarantine_result(q: dict, run_id: str) -> dict:
    return {"run_id": run_id, "source": q["source"], "source_file": q["source_file"], "line": q["line"], "task_id": q.get("task_id"),
            "status": "quarantined", "drop_stage": q["stage"], "drop_reason": q["reason"], "raw": q["raw"]}


def dropped_result(task: dict, run_id: str) -> dict:
    return dict(task, run_id=run_id, status="dropped")


ROWS_READ_FILE = "rows_read.txt"
SAMPLING_STATS_DIR = "sampling_stats"


def _write(pcoll, name: str, staging_dir: str):
    return pcoll | f"Write{name}" >> WriteStaged(str(Path(staging_dir) / name), STAGED[name])


def build(p: beam.Pipeline, spec: RunSpec, backend_factory: Callable[[], Backend],
          judge_factory: Callable[[], Backend] | None = None) -> None:
    """`judge_factory` gives the rubric judge; None: the sampler judges."""
    cfg, run_id = spec.config, spec.run_id
    raw = p | "Read" >> ReadDeliveries(spec.inputs, cfg.limits.max_row_bytes)
    # Rows read, counted straight off the reader: the independent side of
    # the row-accounting check (runner metrics are not available everywhere).
    rows_read = (
        raw
        | "CountRead" >> beam.combiners.Count.Globally()
        | "WriteRowsRead" >> beam.Map(write_count, str(Path(spec.staging_dir) / ROWS_READ_FILE))
    )
    tasks, quarantined = raw | "Validate" >> ValidateRows(cfg.limits.max_field_chars)
    quarantined = quarantined | "StampRun" >> beam.Map(lambda q: dict(q, run_id=run_id))

    hashed = tasks | "NormaliseHash" >> NormalizeAndHash()
    unique, duplicates = hashed | "ExactDedup" >> DropExactDuplicates()
    clean, contaminated = unique | "Decontaminate" >> Decontaminate(
        cfg.decontam.ngram, cfg.decontam.benchmarks, cfg.decontam.extra_paths
    )
    # Before any attempt is paid for: drop tasks whose verifier is broken.
    sane, broken = clean | "VerifierSanity" >> VerifierSanity(cfg.verify, cfg.sampling.groups)
    classified, attempts, unsampled = sane | "Sample" >> SampleAndClassify(
        spec.plan, backend_factory, cfg.sampling.tasks_per_batch, cfg.sampling.groups,
        spec.cache_files, spec.finished_runs, spec.stats_dir, judge_factory,
    )

    dropped = (
        (duplicates, contaminated, broken, unsampled)
        | "AllDropped" >> beam.Flatten()
        | "DroppedResult" >> beam.Map(dropped_result, run_id)
    )
    q_results = quarantined | "QuarantineResult" >> beam.Map(quarantine_result, run_id)
    results = (classified, dropped, q_results) | "AllResults" >> beam.Flatten()
    costs = (results, attempts) | "Costs" >> CostRows(spec.rates, run_id, spec.finished_runs)

    written = [
        _write(results, "results", spec.staging_dir),
        _write(attempts, "attempts", spec.staging_dir),
        _write(quarantined, "quarantine", spec.staging_dir),
        _write(costs, "costs", spec.staging_dir),
        rows_read,
    ]
    # One terminal step that depends on every sink. Beam 2.77's DaskRunner
    # computes only the graph behind the last transform applied; ending on
    # this join makes it run every write (other runners are unaffected).
    _ = tuple(written) | "AllWritten" >> beam.Flatten() | "Done" >> beam.combiners.Count.Globally()

