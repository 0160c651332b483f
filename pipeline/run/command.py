"""`tasksieve run` and `tasksieve dedup`: the driver. Each is pre-flight
into a frozen run context, then the graph, then the shared finish; both
hold the output folder's lock and claim their staging folder the same way.

    pre-flight (preflight.py) -> execute (execute.py) -> finish (finish.py)
"""

from __future__ import annotations

import sys
import time
from datetime import datetime, timezone
from typing import Callable

from tasksieve.pipeline.run.execute import RunRefused, run_graph
from tasksieve.pipeline.run.finish import finish, summarise
from tasksieve.pipeline.run.graph import RunSpec
from tasksieve.pipeline.run.errors import RunError
from tasksieve.pipeline.run.folders import hold_output, inputs_and_output, refuse_foreign
from tasksieve.pipeline.run.preflight import Invocation, RunContext, check_command, prepare_dedup, prepare_run
from tasksieve.pipeline.outputs.staging import claimed_staging
from tasksieve.schemas.config import RunConfig
from tasksieve.transforms.backends.base import Backend
from tasksieve.transforms.sample.attempt_cache import cache_files, finished_runs
from tasksieve.transforms.sample.cache_auth import CacheKeyError, cache_key
from tasksieve.transforms.sample.stage import read_stats


def run(
    inputs: list[str],
    out_dir: str,
    cfg: RunConfig,
    runner: str | None,
    beam_args: list[str],
    config_path: str | None = None,
    backend_factory: Callable[[], Backend] | None = None,
    rates_path: str | None = None,
    dask_address: str | None = None,
    dask_workers: int = 2,
    judge_factory: Callable[[], Backend] | None = None,
    force: bool = False,
) -> dict:
    """Run the funnel; returns the summary figures. `backend_factory`
    replaces the configured engine (tests use a scripted one);
    `judge_factory` the rubric judge (default: the sampling engine)."""
    how = Invocation(runner, tuple(beam_args), config_path, rates_path, dask_address, dask_workers)
    check_command("run", inputs, cfg, how)
    paths, out = inputs_and_output(inputs, out_dir)
    refuse_foreign(out, force)  # before the lock: a refused folder is left as it was
    with hold_output(out, "run"):
        with claimed_staging(out, "run") as staging:
            done = _execute_and_finish(
                prepare_run(paths, out, cfg, how, backend_factory, judge_factory, staging=staging), staging
            )
        return summarise(*done)


def dedup(
    inputs: list[str],
    out_dir: str,
    cfg: RunConfig,
    runner: str | None = None,
    beam_args: list[str] | None = None,
    config_path: str | None = None,
    rates_path: str | None = None,
    dask_address: str | None = None,
    dask_workers: int = 2,
    force: bool = False,
) -> dict:
    """Only the cheap stages (read to decontaminate) on a pool: the graph of
    `run` stopped after decontamination. No model is loaded."""
    how = Invocation(runner, tuple(beam_args or ()), config_path, rates_path, dask_address, dask_workers)
    check_command("dedup", inputs, cfg, how)
    paths, out = inputs_and_output(inputs, out_dir)
    refuse_foreign(out, force)  # before the lock: a refused folder is left as it was
    with hold_output(out, "dedup"):
        with claimed_staging(out, "dedup") as staging:
            done = _execute_and_finish(prepare_dedup(paths, out, cfg, how, staging), staging)
        return summarise(*done)


def _graph_spec(ctx: RunContext, staging) -> RunSpec:
    """The graph's view of the context, with the attempt cache as it is now."""
    if ctx.plan is not None and ctx.cache_dir:
        try:
            cache_key()  # made or checked here, before any work: one line if it cannot be trusted
        except CacheKeyError as e:
            raise RunError(str(e)) from None
    return RunSpec(
        run_id=ctx.run_id,
        inputs=list(ctx.paths),
        staging_dir=str(staging),
        config=ctx.cfg,
        plan=ctx.plan,
        rates=ctx.rates,
        cache_files=tuple(cache_files(ctx.cache_dir)),
        finished_runs=finished_runs(ctx.cache_dir),
        pool_indexes=ctx.pools,
    )


def _announce(ctx: RunContext, spec: RunSpec) -> None:
    if ctx.plan is not None:
        if spec.cache_files:
            print(
                f"attempt cache: {ctx.cache_dir} ({len(spec.cache_files)} files); finished attempts are re-used",
                file=sys.stderr,
            )
        return
    kept_files = [n for n in ("learnable.parquet", "attempts.parquet") if (ctx.out / n).exists()]
    if kept_files:
        print(
            f"dedup: {ctx.out} holds {' and '.join(kept_files)} of an earlier run; they are left as they are",
            file=sys.stderr,
        )
    d = ctx.cfg.dedup
    print(
        f"dedup: {len(ctx.paths)} input file(s) -> read, validate, exact, "
        f"{'near, ' if d.near else ''}{'against pool, ' if ctx.pools else ''}decontaminate ...",
        file=sys.stderr,
    )


def _execute_and_finish(ctx: RunContext, staging) -> tuple:
    """The graph, then the shared finish (the output set's commit); returns
    (context, figures) for the summary."""
    spec = _graph_spec(ctx, staging)
    _announce(ctx, spec)
    started, t0 = datetime.now(timezone.utc), time.perf_counter()
    run_graph(ctx, spec)
    if ctx.plan is not None:
        _check_failed_share(ctx, spec)
    return ctx, finish(ctx, spec, started, t0)


def _check_failed_share(ctx: RunContext, spec: RunSpec) -> None:
    """A run in which too many requests got no usable completion does not
    finish: its learnable set would be reported complete while tasks were
    dropped for the server's faults, not their own."""
    stats = read_stats(spec.stats_dir)
    asked = stats.failed + stats.generated
    share = ctx.cfg.model.max_failed_share
    if stats.failed and stats.failed > share * asked:
        raise RunRefused(
            f"{stats.failed} of {asked} requests to the model failed ({stats.failed / asked:.0%}, over the "
            f"{share:.0%} allowed by model.max_failed_share), first: {stats.first_failure}; the results are not "
            "complete and no output was written. Generations that succeeded are saved in the attempt cache; fix "
            "the cause and the same command resumes."
        )
