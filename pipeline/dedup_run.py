"""`tasksieve dedup`: only the cheap stages (read, validate, normalise,
exact dedup, near dedup, against-pool, decontaminate) on a pool, for a
quick check before anything is sampled. No model is loaded.

Writes the outputs `run` writes (results.parquet with status `kept` for
survivors, quarantine.parquet, costs.parquet with expert costs, and the
run appended to curation.duckdb, so the funnel and drops views work) and
checks `rows_in == kept + dropped + quarantined`.
"""

from __future__ import annotations

import functools
import json
import shutil
import sys
import time
from datetime import datetime, timezone

from tasksieve import __version__
from tasksieve.pipeline.graph import ROWS_COUNTED_FILE, ROWS_READ_FILE, STAGED, RunSpec, build_dedup
from tasksieve.pipeline.outputs import dedup_summary_text, finalize, read_rows_in
from tasksieve.pipeline.run import (IN_PROCESS, RunInterrupted, check_runner_and_flags, execute, hold_output,
                                    inputs_and_output, new_run_id, prepare_pools, refuse_inside_inputs)
from tasksieve.schemas.config import RunConfig
from tasksieve.schemas.rates import load_rates

DEDUP_MODE = "dedup-only"
# What `dedup` writes to OUT. Never learnable.parquet or attempts.parquet:
# in a folder a `run` wrote, those stay the run's.
DEDUP_FILES = ("results", "quarantine", "costs")


def dedup(inputs: list[str], out_dir: str, cfg: RunConfig, runner: str | None = None, beam_args: list[str] | None = None,
          config_path: str | None = None, rates_path: str | None = None, dask_address: str | None = None,
          dask_workers: int = 2) -> dict:
    check_runner_and_flags(runner, beam_args or [])
    refuse_inside_inputs(cfg.dedup.save_index, inputs, "--save-index")
    paths, out = inputs_and_output(inputs, out_dir)
    with hold_output(out, "dedup"):
        return _dedup(paths, out, cfg, runner, beam_args or [], config_path, rates_path, dask_address, dask_workers)


def _dedup(paths: list[str], out, cfg: RunConfig, runner: str | None, beam_args: list[str], config_path: str | None,
           rates_path: str | None, dask_address: str | None, dask_workers: int) -> dict:
    rates = load_rates(rates_path or cfg.rates)
    run_id = new_run_id()
    staging = out / "_staging" / run_id
    pools = prepare_pools(cfg, staging)
    spec = RunSpec(run_id=run_id, inputs=paths, staging_dir=str(staging), config=cfg, plan=None, rates=rates,
                   pool_indexes=pools)
    kept_files = [n for n in ("learnable.parquet", "attempts.parquet") if (out / n).exists()]
    if kept_files:
        print(f"dedup: {out} holds {' and '.join(kept_files)} of an earlier run; they are left as they are",
              file=sys.stderr)
    print(f"dedup: {len(paths)} input file(s) -> read, validate, exact, "
          f"{'near, ' if cfg.dedup.near else ''}{'against pool, ' if pools else ''}decontaminate ...", file=sys.stderr)
    started = datetime.now(timezone.utc)
    t0 = time.perf_counter()
    try:
        execute(functools.partial(build_dedup, spec=spec), runner, beam_args, dask_address, dask_workers)
    except KeyboardInterrupt:
        shutil.rmtree(staging, ignore_errors=True)
        raise RunInterrupted("interrupted: dedup keeps nothing of an unfinished pass and the output files are as "
                             "they were; start the same command again to run it") from None
    rows_in = read_rows_in(staging, ROWS_COUNTED_FILE)
    rows_read = read_rows_in(staging, ROWS_READ_FILE)
    wall = time.perf_counter() - t0
    print(f"dedup: {rows_in} rows in {wall:.1f}s ({rows_in / wall if wall else 0:.0f} rows/s); writing outputs ...",
          file=sys.stderr)
    run_row = {
        "run_id": run_id, "started_at": started.isoformat(), "finished_at": datetime.now(timezone.utc).isoformat(),
        "wall_seconds": wall, "tasksieve_version": __version__, "runner": runner or IN_PROCESS,
        "inputs": json.dumps(paths), "config_path": config_path, "config": cfg.to_json(), "rates": rates.to_json(),
        # No model in this mode: empty strings, not nulls, so the column types
        # match those of `run` rows in the same database.
        "model_id": "", "sampler_key": "", "sampling_mode": DEDUP_MODE, "k": 0,
    }
    figures = finalize(out, staging, STAGED, rows_in, run_row, 0, rows_read=rows_read, files=DEDUP_FILES,
                       learnable_file=False)
    if (out / "_staging").exists() and not any((out / "_staging").iterdir()):
        shutil.rmtree(out / "_staging", ignore_errors=True)
    print(dedup_summary_text(out, run_id, figures))
    return dict(figures, run_id=run_id)
