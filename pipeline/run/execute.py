"""Execution: the Beam runner, the Dask cluster, and what a failure in the
middle of a graph means for the person who started it (interrupted,
stopped by the model backend, or a bug)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import re
import shutil
from pathlib import Path
from typing import Callable

import apache_beam as beam
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions

from tasksieve.pipeline.run.graph import RunSpec, build
from tasksieve.pipeline.run.errors import RunInterrupted, RunStopped
from tasksieve.pipeline.run.preflight import DASK, IN_PROCESS, RunContext
from tasksieve.transforms.backends.base import BackendUnavailable, ServerRefused
from tasksieve.transforms.batch.chunks import spill_folder


def _runner(name: str | None):
    if name in (None, IN_PROCESS):
        # The FnApiRunner runs the whole graph in this process: no runner
        # binary download (the plain DirectRunner may fetch Prism), no network.
        from apache_beam.runners.portability.fn_api_runner import FnApiRunner

        return FnApiRunner()
    if name == DASK:
        # Beam's DaskRunner, its partition count bounded (dask_runner.py says why).
        from tasksieve.pipeline.run.dask_runner import BoundedDaskRunner

        return BoundedDaskRunner()
    return name


@contextlib.contextmanager
def dask_cluster(address: str | None, workers: int):
    """The scheduler address to use: the given one, or that of a local
    cluster of `workers` single-threaded processes, shut down afterwards."""
    if address:
        yield address
        return
    import logging

    from distributed import LocalCluster

    cluster = LocalCluster(
        n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=logging.ERROR
    )
    try:
        yield cluster.scheduler_address
    finally:
        cluster.close()


def _without_type_check(beam_args: list[str]) -> list[str]:
    """Beam's flags with its construction-time type check off unless asked
    for (--pipeline_type_check): the graph is tasksieve's own, fixed and
    tested, and inferring every step's types cost 0.15-0.45 s of every
    run (bench/README.md, "Measured design choices"). Decisions do not
    depend on it."""
    if any(a.split("=", 1)[0] in ("--pipeline_type_check", "--no_pipeline_type_check") for a in beam_args):
        return beam_args
    return ["--no_pipeline_type_check", *beam_args]


def execute(
    build_graph: Callable[[beam.Pipeline], None],
    runner: str | None,
    beam_args: list[str],
    dask_address: str | None,
    dask_workers: int,
) -> None:
    """Build the graph on the chosen runner and run it to completion."""
    with contextlib.ExitStack() as stack:
        if runner == DASK:
            address = stack.enter_context(dask_cluster(dask_address, dask_workers))
            beam_args = [*beam_args, f"--dask_client_address={address}"]
        p = beam.Pipeline(runner=_runner(runner), options=PipelineOptions(_without_type_check(beam_args)))
        build_graph(p)
        result = p.run()
        result.wait_until_finish()
        client = getattr(result, "client", None)  # the DaskRunner's own client
        if client is not None:
            client.close()


# Beam appends the step to a worker's error: " [while running 'Sample/...']".
_RUNNING = re.compile(r" \[while running '[^']*'\]")


class RunRefused(Exception):
    """The model server refused the run's requests (a bad key, a wrong model
    name or URL, a status no retry mends), or too many requests failed for
    the results to be complete: exit 5, one line. Finished attempts are
    saved; fix the cause, and the same command resumes."""


def _backend_stop(e: BaseException, kind: type = BackendUnavailable) -> str | None:
    """The message of a `kind` exception behind `e`, however the runner
    wrapped it (Beam re-raises worker errors with its own context added)."""
    name = kind.__name__
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, kind) or type(e).__name__ == name:
            return _RUNNING.sub("", str(e).split("\n")[0])
        if name in str(e):
            line = next(ln for ln in str(e).splitlines() if name in ln)
            return _RUNNING.sub("", line.split(f"{name}:", 1)[-1].strip())
        e = e.__cause__ or e.__context__
    return None


def _interrupt_behind(e: BaseException) -> bool:
    """Whether a KeyboardInterrupt is behind `e`, however a runner wrapped it."""
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, KeyboardInterrupt):
            return True
        e = e.__cause__ or e.__context__
    return False


def _interrupted_message(cache_dir: str | None, run_id: str) -> str:
    """What a run interrupted by Ctrl-C leaves behind, in one line."""
    saved = 0
    if cache_dir and Path(cache_dir).is_dir():
        for f in Path(cache_dir).glob(f"{run_id}-*.jsonl"):
            try:
                with open(f, "rb") as fh:
                    saved += sum(1 for line in fh if line.endswith(b"\n"))
            except OSError:
                pass
    if saved:
        return (
            f"interrupted: the {saved} attempts this run finished are saved in {cache_dir}; start the same "
            "command again to resume (they are re-used, none is paid for twice)"
        )
    return (
        "interrupted before any attempt was finished; nothing was written to the outputs; start the same "
        "command again to run it"
    )


def _dedup_interrupted(staging: Path) -> RunInterrupted:
    shutil.rmtree(staging, ignore_errors=True)
    return RunInterrupted(
        "interrupted: dedup keeps nothing of an unfinished pass and the output files are as "
        "they were; start the same command again to run it"
    )


def _run_failed(ctx: RunContext, e: BaseException) -> BaseException:
    """What a graph failure of `tasksieve run` becomes: the interruption or
    the backend stop, said in one line; anything else is re-raised as is."""
    if _interrupt_behind(e):
        return RunInterrupted(_interrupted_message(ctx.cache_dir, ctx.run_id))
    refused = _backend_stop(e, ServerRefused)
    if refused is not None:
        return RunRefused(
            f"{refused}. Nothing was judged from the failed requests and none is cached; attempts "
            "finished before are saved, and the same command resumes once this is fixed."
        )
    stop = _backend_stop(e)
    if stop is None:
        return e
    return RunStopped(
        f"the model backend stopped answering: {stop}. Every attempt finished before that is saved in "
        f"{ctx.cache_dir}; start the same command again to resume: finished attempts are re-used, none is "
        "paid for twice."
    )


@contextlib.contextmanager
def fewer_collections(gen0: int = 50_000):
    """Python's cyclic collector runs every 700 net allocations by default;
    a graph run allocates millions of small objects (rows as dicts, the
    chunks held between stages) and walked them over and over: ~1 s of a
    100k-task `dedup` (bench/README.md, "Measured design choices"). The
    stages make few cycles, so collecting them every `gen0` allocations
    frees the same memory, later;
    what was alive before the run (imports, the graph) is frozen out of
    every scan."""
    old = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(gen0, old[1], old[2])
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()


def _one_process(runner: str | None, beam_args) -> bool:
    """Whether every stage runs in this process, so the batch path may hand
    values between stages as objects (chunks.Spill.memory_bytes): the
    in-process runner, unless its flags ask for worker processes."""
    if runner not in (None, IN_PROCESS):
        return False
    return PipelineOptions(list(beam_args)).view_as(DirectOptions).direct_running_mode != "multi_processing"


def run_graph(ctx: RunContext, spec: RunSpec) -> None:
    """Build the funnel for `spec` on the context's runner and run it."""
    how = ctx.how
    with contextlib.ExitStack() as stack:
        if how.dask_address is None:
            # This machine's workers share one private folder (chunks.py); a
            # remote cluster's workers could not, so there chunks stay in memory.
            # Inside the run's staging folder: a killed run's spill is removed
            # with its staging folder by the next run into the same OUT.
            held = spec.config.dedup.memory_mib << 20 if _one_process(how.runner, how.beam_args) else 0
            spec = dataclasses.replace(spec, spill=stack.enter_context(spill_folder(spec.staging_dir, held)))
        stack.enter_context(fewer_collections())
        stack.enter_context(kept_embeddings(ctx.embedding_cache))
        _run_graph(ctx, spec)


@contextlib.contextmanager
def kept_embeddings(folder: str | None):
    """Names the encoder's folder of the embedding cache
    (transforms/same_problem/embed_cache.py) to this process and the worker
    processes it starts, for this run only; what the run embedded is written
    there before the run ends."""
    import os

    from tasksieve.transforms.same_problem import embed
    from tasksieve.transforms.same_problem.embed_cache import ENV

    before = os.environ.get(ENV)
    if folder:
        os.environ[ENV] = folder
    else:
        os.environ.pop(ENV, None)
    try:
        yield
    finally:
        embed.flush_kept(30.0)
        embed.forget_vectors()  # kept on disk now; the outputs step needs the memory
        if before is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = before


def _run_graph(ctx: RunContext, spec: RunSpec) -> None:
    how = ctx.how
    graph = functools.partial(build, spec=spec, backend_factory=ctx.backend_factory, judge_factory=ctx.judge_factory)
    try:
        execute(graph, how.runner, list(how.beam_args), how.dask_address, how.dask_workers)
    except KeyboardInterrupt:
        if ctx.command == "dedup":
            raise _dedup_interrupted(Path(spec.staging_dir)) from None
        raise RunInterrupted(_interrupted_message(ctx.cache_dir, ctx.run_id)) from None
    except Exception as e:
        if ctx.command == "dedup":
            if _interrupt_behind(e):
                raise _dedup_interrupted(Path(spec.staging_dir)) from None
            raise
        failure = _run_failed(ctx, e)
        if failure is e:
            raise
        raise failure from None
