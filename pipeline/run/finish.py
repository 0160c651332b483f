"""Finish a run, the same way for `run` and `dedup`: read the counts the
graph left, write the run record, consolidate and check the outputs
(`finalize.finalize`) into a new output set and make it current in one
step (`output_set.OutputSet`), settle the attempt cache from the attempts
already in hand, and print the summary."""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from tasksieve import __version__
from tasksieve.pipeline.run.graph import ROWS_COUNTED_FILE, ROWS_READ_FILE, STAGED, RunSpec
from tasksieve.pipeline.outputs.output_set import OutputSet
from tasksieve.pipeline.outputs.finalize import dedup_summary_text, finalize, read_rows_in, summary_text
from tasksieve.pipeline.outputs.safe_fs import is_real_dir
from tasksieve.pipeline.run.preflight import IN_PROCESS, RunContext
from tasksieve.transforms.sample.attempt_cache import settle_run
from tasksieve.pipeline.outputs.staging import chunk_name, chunk_table, write_table
from tasksieve.transforms.sample.stage import read_stats
from tasksieve.transforms.verify.judge import store as judge_store

DEDUP_MODE = "dedup-only"
# What `dedup` writes to OUT. Never learnable.parquet or attempts.parquet:
# in a folder a `run` wrote, those stay the run's.
DEDUP_FILES = ("results", "quarantine", "costs")


def run_record(ctx: RunContext, started: datetime, wall: float, sampling=None) -> dict:
    """The row of the `runs` table (figures are added by finalize)."""
    row = {
        "run_id": ctx.run_id,
        "started_at": started.isoformat(),
        "finished_at": datetime.now(timezone.utc).isoformat(),
        "wall_seconds": wall,
        "tasksieve_version": __version__,
        "runner": ctx.how.runner or IN_PROCESS,
        "inputs": json.dumps(list(ctx.paths)),
        "config_path": ctx.how.config_path,
        "config": ctx.cfg.to_json(),
        "rates": ctx.rates.to_json(),
        "warnings": json.dumps(list(ctx.warnings)),
    }
    if ctx.plan is None:
        # No model in this mode: empty strings, not nulls, so the column types
        # match those of `run` rows in the same database.
        return dict(row, model_id="", sampler_key="", sampling_mode=DEDUP_MODE, k=0)
    return dict(
        row,
        model_id=ctx.model_id,
        sampler_key=ctx.plan.sampler_key,
        sampling_mode=ctx.plan.mode,
        k=ctx.plan.k,
        attempts_generated=sampling.generated,
        attempts_reused=sampling.reused,
        engine_seconds=sampling.engine_seconds,
        sampling_wall_seconds=sampling.wall_seconds,
        # Share of the sampling stage's time spent inside the engine (the
        # rest: verification, waiting on stragglers of a wave, bookkeeping).
        engine_busy_fraction=sampling.engine_seconds / sampling.wall_seconds if sampling.wall_seconds else None,
    )


def finish(ctx: RunContext, spec: RunSpec, started: datetime, t0: float) -> dict:
    """Everything after the graph; returns the summary figures."""
    staging, out = Path(spec.staging_dir), ctx.out
    rows_in = read_rows_in(staging, ROWS_COUNTED_FILE)
    rows_read = read_rows_in(staging, ROWS_READ_FILE)
    wall = time.perf_counter() - t0
    if ctx.plan is None:
        print(
            f"dedup: {rows_in} rows in {wall:.1f}s ({rows_in / wall if wall else 0:.0f} rows/s); writing outputs ...",
            file=sys.stderr,
        )
        with OutputSet(out, ctx.run_id) as outset:
            figures, _ = finalize(
                outset.dir,
                staging,
                STAGED,
                rows_in,
                run_record(ctx, started, wall),
                0,
                rows_read=rows_read,
                files=DEDUP_FILES,
                learnable_file=False,
            )
            outset.commit()
    else:
        sampling = read_stats(spec.stats_dir)
        run_row = run_record(ctx, started, wall, sampling)
        gate = judge_store.read_records(staging / judge_store.GATE_DIR)
        _stage_gate_costs(staging, gate, ctx)
        with OutputSet(out, ctx.run_id) as outset:
            figures, tables = finalize(outset.dir, staging, STAGED, rows_in, run_row, ctx.plan.k, rows_read=rows_read)
            if gate:
                judge_store.load_table(
                    outset.dir / "curation.duckdb", ctx.run_id, judge_store.agreement_table(gate, ctx.cfg.judge)
                )
            outset.commit()
        if gate:
            figures.update(
                judge_store.judge_figures(
                    gate, ctx.cfg.judge, tables["results"], tables["attempts"], tables["costs"], ctx.plan.k
                )
            )
            figures["judge_line"] = judge_store.judge_line(figures)
        if ctx.cache_dir:
            settle_run(ctx.cache_dir, ctx.run_id, tables["attempts"], spec.finished_runs)
        figures.update(
            attempts_generated=sampling.generated,
            attempts_reused=sampling.reused,
            engine_seconds=sampling.engine_seconds,
            engine_busy_fraction=run_row["engine_busy_fraction"],
        )
    return figures


def _stage_gate_costs(staging: Path, gate: list[dict], ctx: RunContext) -> None:
    """The judge gate's calls, priced as component `judge`, staged beside the
    graph's cost rows so finalize loads them with the rest."""
    rows = judge_store.cost_rows(gate, ctx.rates)
    if rows:
        table = chunk_table(rows, STAGED["costs"])
        write_table(table, str(staging / "costs"), "judge-gate-" + chunk_name(table))


def summarise(ctx: RunContext, figures: dict) -> dict:
    """Remove an emptied staging root, print the summary, return the figures."""
    root = ctx.out / "_staging"
    if is_real_dir(root) and not os.listdir(root):
        try:
            os.rmdir(root)
        except OSError:
            pass  # another run's staging appeared: it stays
    if ctx.plan is None:
        print(dedup_summary_text(ctx.out, ctx.run_id, figures))
    else:
        figures["sandbox"] = ctx.sandbox_note
        print(summary_text(ctx.out, ctx.run_id, figures))
    return dict(figures, run_id=ctx.run_id, warnings=list(ctx.warnings))
