"""The `queue` schedule (the default): the engine is topped up attempt by
attempt instead of wave by wave.

The wave schedule (stage.py `sample_tasks`) sends a batch's next attempts
only once every attempt of the wave before is back and verified, so the
engine's batch shrinks at the end of each wave and its last few long
completions keep it at a fraction of its speed (issue 41: 0.83x the tokens/s
of one `generate` call). Here each task goes on as soon as its own attempts
are back: its next ones join the engine's running batch at once, and a new
task is let in as soon as one is decided, so up to `tasks_per_batch` tasks
are open at any time (`predicted` lets in a whole batch at a time: its
predictions learn from the batches decided before, as under waves). The
rubric judge's requests join the same queue where the judge is this
engine (verify_behind.py).

The attempts are the same as under waves: a task's next attempts depend on
its own outcomes only (stage.more_attempts), its seeds on its content hash
and attempt index only (stage.request_for), so the same attempts are asked
for, with the same seeds, in another order; tests/sample/test_queued.py
holds both schedules to that.

Beam-free, like stage.py; transform.py picks the schedule."""

from __future__ import annotations

import time
from typing import Iterator

from tasksieve.schemas.rows import Task
from tasksieve.transforms.backends.base import Backend, GenRequest, GenResult
from tasksieve.transforms.sample.attempt_bar import SamplingProgress
from tasksieve.transforms.sample.attempt_cache import CacheWriter, cache_record
from tasksieve.transforms.sample import stage
from tasksieve.transforms.sample.engine_queue import open_queue
from tasksieve.transforms.sample.verify_behind import VerifyBehind
from tasksieve.transforms.sample.stage import (
    ATTEMPT_TAG,
    RESULT_TAG,
    SamplePlan,
    SamplingStats,
    _from_cache,
    _initial_state,
    attempt_row,
    cached_generation,
    default_judge,
    checked,
    finish_task,
    is_generation,
    learn,
    more_attempts,
    plan_predictions,
    request_for,
)

# The attempt cache is flushed to disk at most this often (seconds) while
# attempts stream in, and always when the queue runs dry: under waves it was
# once per wave.
SYNC_EVERY_S = 2.0


def sample_queued(
    tasks: list[Task],
    backend: Backend,
    plan: SamplePlan,
    progress: SamplingProgress | None = None,
    cache: CacheWriter | None = None,
    stats: SamplingStats | None = None,
    judge: Backend | None = None,
    cached: dict[str, list[dict]] | None = None,
    predictor=None,
    window: int | None = None,
) -> Iterator[tuple[str, dict]]:
    """What stage.sample_tasks yields, for all `tasks` of a group at once
    (its arguments are the same); at most `window` tasks open at a time
    (default: tasks_per_batch)."""
    progress = progress or SamplingProgress()
    judge = default_judge(backend, judge)
    stats = stats if stats is not None else SamplingStats()
    t_start = time.perf_counter()
    run = _Run(plan, open_queue(backend, progress, stage.MAX_WAVE_REQUESTS), progress, cache, stats, predictor)
    run.window = window or plan.sampling.tasks_per_batch
    # The judge's requests join the queue where the judge is this engine.
    send_judge = run.send_judge if judge is backend and getattr(run.queue, "takes_judge", False) else None
    run.verifier = VerifyBehind(plan, stats, judge, not getattr(backend, "shares_cpu", False), send_judge)
    busy_at_start = getattr(run.queue, "busy_seconds", None)
    try:
        yield from run.drive(list(_initial_state(tasks, cached or {}).values()))
    finally:
        run.queue.close()
        run.verifier.close()
        # The engine's own clock where it keeps one (vLLM): its steps inside
        # a judge call serve the sampling requests too, so the waits alone
        # would undercount it. Else the time spent waiting on the queue.
        busy = run.queue.busy_seconds - busy_at_start if busy_at_start is not None else run.waited
        stats.engine_seconds += busy
        if cache is not None:
            cache.sync()
        stats.wall_seconds += time.perf_counter() - t_start


class _Run:
    """One group's tasks through the queue: which tasks are open, which
    tickets are theirs, what finished from the cache."""

    def __init__(self, plan, queue, progress, cache, stats, predictor):
        self.plan, self.policy, self.queue = plan, plan.policy, queue
        self.progress, self.cache, self.stats, self.predictor = progress, cache, stats, predictor
        self.tickets: dict[int, tuple[dict, object]] = {}  # ticket -> (task state, request)
        self.ready: list[tuple] = []  # finished without the engine: cached generations
        self.persisted: set[int] = set()
        self.last_sync = time.perf_counter()
        self.waited = 0.0  # seconds in queue.wait

    def drive(self, states: list[dict]) -> Iterator[tuple[str, dict]]:
        window = self.window
        waiting, open_tasks = iter(states), 0
        left, batch = len(states), []
        while True:
            # Let tasks in while there is room: one at a time, or under
            # `predicted` a whole batch once the one before is decided.
            if open_tasks == 0 or (self.plan.mode != "predicted" and open_tasks < window):
                if self.plan.mode == "predicted":
                    learn(self.predictor, batch)
                batch = [st for _, st in zip(range(window - open_tasks), waiting)]
                if batch and self.plan.mode == "predicted":
                    self.predictor = plan_predictions(batch, self.plan, self.predictor)
                for st in batch:
                    open_tasks += 1
                    result = self._go_on(st)
                    if result is not None:
                        open_tasks, left = open_tasks - 1, left - 1
                        yield RESULT_TAG, result
            if left == 0:
                if self.plan.mode == "predicted":
                    learn(self.predictor, batch)
                return
            # Verdicts that are in first: each task whose attempts are all
            # verified goes on. Else the engine (without blocking while
            # verification runs beside it, so neither waits on the other).
            engine_busy = bool(self.ready) or self.queue.in_flight > 0
            verified = self.verifier.take(block=not engine_busy)
            if verified:
                for item, verdict in verified:
                    if verdict is not None:
                        yield ATTEMPT_TAG, attempt_row(item, verdict, self.plan)
                    item[0]["out"] -= 1
                for st in _unique(item[0] for item, _ in verified):
                    if st["out"] == 0:
                        result = self._go_on(st)
                        if result is not None:
                            open_tasks, left = open_tasks - 1, left - 1
                            yield RESULT_TAG, result
                continue
            if not engine_busy and not self.verifier.busy:
                raise RuntimeError("sampling queue: open tasks but nothing in flight (a scheduler bug)")
            if engine_busy:
                self.verifier.start(self._next_finished(block=not self.verifier.busy))

    def _go_on(self, st: dict) -> dict | None:
        """Ask for the task's next attempts, or return its result row."""
        more = more_attempts(st, self.policy)
        if more == 0:
            return finish_task(st, self.plan, self.progress)
        st["asked"] += more
        st["out"] = more
        to_engine = []
        for idx in range(st["n"], st["n"] + more):
            req = request_for(st, idx, self.plan)
            rec = cached_generation(st, req)
            if rec is not None:
                self.ready.append((st, req, _from_cache(rec), rec["run_id"]))
                self.stats.reused += 1
                self.progress.reused(1)
            else:
                to_engine.append(req)
        if to_engine:
            for ticket, req in zip(self.queue.submit(to_engine), to_engine):
                self.tickets[ticket] = (st, req)
        return None

    def _next_finished(self, block: bool) -> list[tuple[dict, object, GenResult, str | None]]:
        """Cached generations first (no engine time), else what the engine
        finished next (with `block`, at least one; else what one step of
        it finished, maybe nothing)."""
        if self.ready:
            ready, self.ready = self.ready, []
            return ready
        t0 = time.perf_counter()
        try:
            done = self.queue.wait(self._persist, block)
        finally:
            self.waited += time.perf_counter() - t0
        self.stats.engine_calls += int(bool(done))
        out = []
        for ticket, res in done:
            if self.verifier.is_judging(ticket):
                self.verifier.judged(ticket, res)  # a verdict, not an attempt
                continue
            res = checked(res)
            self._persist(ticket, res)  # a backend that reports only at the end
            st, req = self.tickets.pop(ticket)
            self.persisted.discard(ticket)
            out.append((st, req, res, None))
            self.stats.generated += int(is_generation(res))
        now = time.perf_counter()
        if self.cache is not None and done and (now - self.last_sync > SYNC_EVERY_S or not self.tickets):
            self.cache.sync()
            self.last_sync = now
        return out

    def send_judge(self, requests: list[GenRequest]) -> list[int]:
        """The rubric judge's requests into the engine's queue (not attempts:
        not counted, cached or verified)."""
        return self.queue.submit(requests, counted=False)

    def _persist(self, ticket: int, res: GenResult) -> None:
        # As each generation finishes, so a run killed mid-way keeps every
        # attempt it already paid for; once per ticket.
        if ticket in self.persisted or ticket not in self.tickets:
            return  # done already, or the judge's
        self.persisted.add(ticket)
        res = checked(res)
        if self.cache is not None and res.origin is None and is_generation(res):
            self.cache.write(cache_record(self.plan, self.tickets[ticket][1], res))


def _unique(states) -> list[dict]:
    seen, out = set(), []
    for st in states:
        if id(st) not in seen:
            seen.add(id(st))
            out.append(st)
    return out
