"""The sampling stage under Beam: `SampleAndClassify`, the PTransform the
run graph uses, over stage.py's Beam-free `sample_tasks`. Cached attempts
are joined to their tasks here; the waves, the cache writes and the stats
are stage.py's. Keep this a thin shell: the decisions live in stage.py."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Callable

import apache_beam as beam

from tasksieve.transforms.sample.attempt_cache import (
    pick_cached,
    read_cache_file,
    writer_for,
)
from tasksieve.transforms.backends.base import Backend
from tasksieve.transforms.sample.attempt_bar import AttemptBar
from tasksieve.transforms.stage import DROPPED, KEPT, split_kept_dropped, split_tagged
from tasksieve.transforms.sample.queued import sample_queued
from tasksieve.transforms.sample.stage import (
    ATTEMPT_TAG,
    RESULT_TAG,
    SamplePlan,
    SamplingStats,
    needs_no_sampling,
    sample_tasks,
    write_stats,
)


class _Progress:
    """One sampling bar per worker process (attempt_bar.py: counted in
    attempts, its rate from the first request to the engine), shared by
    the groups that process samples."""

    _bar: AttemptBar | None = None
    _lock = threading.Lock()

    @classmethod
    def get(cls, tasks: int, k: int) -> AttemptBar:
        with cls._lock:
            if cls._bar is None or cls._bar.closed:
                cls._bar = AttemptBar(tasks, k)
            return cls._bar


class _SampleFn(beam.DoFn):
    def __init__(
        self,
        plan: SamplePlan,
        backend_factory: Callable[[], Backend],
        stats_dir: str | None,
        judge_factory: Callable[[], Backend] | None = None,
    ):
        self.plan = plan
        self.backend_factory = backend_factory
        self.stats_dir = stats_dir
        self.judge_factory = judge_factory

    def setup(self):
        # The factory returns the process-wide engine: loaded once per worker.
        self.backend = self.backend_factory()
        self.cache = writer_for(self.plan.cache_dir, self.plan.run_id) if self.plan.cache_dir else None
        self.judge = self.judge_factory() if self.judge_factory else self.backend
        self.predictor = None
        if self.plan.mode == "predicted":
            from tasksieve.transforms.sample.prior_history import predictor_for

            self.predictor = predictor_for(self.plan)  # earlier runs, then this worker's batches

    def process(self, group, total, tasks_per_batch):
        progress = _Progress.get(total, self.plan.policy.k)  # drawn before the first (long) wave
        _, pairs = group
        pairs = sorted(pairs, key=lambda tc: tc[0]["content_hash"])  # deterministic batches
        cached = {task["content_hash"]: recs for task, recs in pairs if recs}
        tasks = [task for task, _ in pairs]
        # Before any rubric attempt is paid for: is the judge trustworthy on the task?
        tasks, judge_dropped = _judge_gate(tasks, self.judge, self.plan, self.stats_dir)
        for row in judge_dropped:
            progress.decided(0)
            yield RESULT_TAG, row
        progress.start_clock()
        stats = SamplingStats()
        shared = (self.backend, self.plan, progress, self.cache, stats, self.judge, cached, self.predictor)
        if self.plan.sampling.schedule == "queue":
            # One queue for the group: tasks_per_batch tasks open at a time.
            yield from sample_queued(tasks, *shared, window=tasks_per_batch)
        else:
            for i in range(0, len(tasks), tasks_per_batch):
                # ("attempt", row) and ("result", row) pairs, split downstream.
                yield from sample_tasks(tasks[i : i + tasks_per_batch], *shared)
        if self.stats_dir:
            write_stats(self.stats_dir, stats)


def _judge_gate(tasks: list[dict], judge, plan: SamplePlan, stats_dir: str | None) -> tuple[list[dict], list[dict]]:
    """(tasks to sample, rubric tasks dropped by the judge gate); the gate's
    records go beside the sampling stats, for finish.py (judge/store.py)."""
    if not any(t.get("domain") == "rubric" for t in tasks):
        return tasks, []
    from tasksieve.transforms.verify.judge import gate, store

    if judge is None or not getattr(judge, "can_judge", True):
        return tasks, []  # no judge at all: every rubric attempt fails with "no judge backend configured"
    kept, dropped, records = gate.screen(tasks, judge, plan.judge, plan.verify, plan.run_id, plan.graded)
    if stats_dir:
        store.write_records(Path(stats_dir).parent / store.GATE_DIR, records)
    return kept, dropped


def attach_cached(kv, finished: frozenset):
    """(task, its cached generations) pairs: the cache rides beside the task,
    never inside it."""
    _, grouped = kv
    cached = pick_cached(grouped["cached"], finished)
    for task in grouped["tasks"]:
        yield task, cached


class SampleAndClassify(beam.PTransform):
    """Tasks in; (classified task results, attempts, tasks that cannot be
    sampled) out. Cached generations (attempt_cache.py) are joined to their
    tasks by content_hash first, so they are re-used, not paid for again."""

    def __init__(
        self,
        plan: SamplePlan,
        backend_factory: Callable[[], Backend],
        tasks_per_batch: int,
        groups: int,
        cache_files: list[str] = (),
        finished_runs: frozenset = frozenset(),
        stats_dir: str | None = None,
        judge_factory: Callable[[], Backend] | None = None,
    ):
        super().__init__()
        self.plan = plan
        self.backend_factory = backend_factory
        self.tasks_per_batch = tasks_per_batch
        self.groups = groups
        self.cache_files = list(cache_files)
        self.finished_runs = finished_runs
        self.stats_dir = stats_dir
        self.judge_factory = judge_factory

    def _with_cached(self, to_sample):
        """(task, cached generations) pairs; an empty list without a cache."""
        if not self.cache_files:
            return to_sample | "NoCache" >> beam.Map(lambda t: (t, []))
        plan = self.plan
        cached = (
            to_sample.pipeline
            | "CacheFiles" >> beam.Create(self.cache_files)
            | "ReadCache" >> beam.FlatMap(read_cache_file, plan.model_id, plan.sampler_key)
            | "CachedByHash" >> beam.Map(lambda r: (r["content_hash"], r))
        )
        return (
            {"tasks": to_sample | "TaskByHash" >> beam.Map(lambda t: (t["content_hash"], t)), "cached": cached}
            | "JoinCache" >> beam.CoGroupByKey()
            | "AttachCached" >> beam.FlatMap(attach_cached, self.finished_runs)
        )

    def expand(self, tasks):
        def route(task):
            dropped = needs_no_sampling(task)
            yield (KEPT, task) if dropped is None else (DROPPED, dropped)

        to_sample, unsampled = split_kept_dropped(tasks | "HasVerifier" >> beam.FlatMap(route), "HasVerifierSplit")
        to_sample = self._with_cached(to_sample)
        total = to_sample | "CountForProgress" >> beam.combiners.Count.Globally()
        groups = self.groups
        sampled = (
            to_sample
            # Tasks are spread over `groups` keyed groups (one per worker on a
            # cluster), and each group is cut into full batches: one engine
            # call per wave per batch. Not BatchElements: it emits its last
            # batch from finish_bundle, which Beam 2.77's DaskRunner drops.
            | "KeyByGroup" >> beam.Map(lambda tc: (int(tc[0]["content_hash"][:8], 16) % groups, tc))
            | "Group" >> beam.GroupByKey()
            | "SampleVerifyClassify"
            >> beam.ParDo(
                _SampleFn(self.plan, self.backend_factory, self.stats_dir, self.judge_factory),
                beam.pvalue.AsSingleton(total),
                self.tasks_per_batch,
            )
        )
        out = split_tagged(sampled, "SampledSplit", (RESULT_TAG, ATTEMPT_TAG))
        return out[RESULT_TAG], out[ATTEMPT_TAG], unsampled
