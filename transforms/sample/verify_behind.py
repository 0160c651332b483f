"""Verification beside the engine, for the `queue` schedule (queued.py).

Under the queue, attempts come back a few at a time. An engine that does
not use this machine's cores (a GPU, a server) would sit idle while they
are verified; so there code and math attempts are checked in worker
threads (their sandboxes and math workers are processes) while the
scheduler keeps stepping the engine, and a task goes on once all of its
attempts are verified.

Rubric attempts whose judge is the sampling engine itself (the default)
send their judge requests into the same queue (`send_judge`), where they
join the running batch; their verdicts are made as the answers come back
(`judged`). A blocking judge `generate` would stop the scheduler from
topping the engine up until the judge's last answer, and the batch would
shrink meanwhile (bench/README.md, "engine_feed.py"). Any other judge (a
server, another model) is called at once, in the scheduler's thread.

On the CPU (the backend's `shares_cpu`) the engine's threads take every
core, and work beside them slows each of its steps more than the work
takes alone (bench/README.md, "engine_feed.py"): there each handful is
verified at once, by one `verify_attempts` call (stage.verify_finished).

The verdicts are those `stage.record` gives: the same verifiers on the
same (task, completion, seed)."""

from __future__ import annotations

from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Callable

from tasksieve.transforms.backends.base import Backend, GenRequest, GenResult
from tasksieve.transforms.sample.stage import SamplePlan, SamplingStats, real_attempts, verify_finished
from tasksieve.transforms.verify import math_answers as vm
from tasksieve.transforms.verify.verifiers import rubric_requests, rubric_verdict, verify_one

# (task state, request, result, run it came from if not this one): a finished request.
Finished = tuple


class VerifyBehind:
    """`beside=False` verifies each handful there and then (one
    `verify_attempts` call, its own workers in parallel): for an engine
    on the CPU (`shares_cpu`), whose steps slow down more under work
    beside them than that work takes alone (bench/README.md, "Feeding
    the engine")."""

    def __init__(
        self,
        plan: SamplePlan,
        stats: SamplingStats,
        judge: Backend | None,
        beside: bool = True,
        send_judge: Callable[[list[GenRequest]], list[int]] | None = None,
    ):
        self.plan, self.stats, self.judge, self.beside = plan, stats, judge, beside
        self.send_judge = send_judge if judge is not None else None
        self.judging: dict[int, tuple[Finished, str]] = {}  # judge ticket -> (attempt, nonce)
        vm.configure(plan.verify.parallel)
        self.pool = (
            ThreadPoolExecutor(max_workers=plan.verify.parallel, thread_name_prefix="tasksieve-verify")
            if beside
            else None
        )
        self.pending: dict[Future, Finished] = {}
        self.now: list[tuple[Finished, dict | None]] = []

    def start(self, finished: list[Finished]) -> None:
        """Verification of these begins; a request that is not an attempt
        (stage.real_attempts) is done at once, with no verdict."""
        real = real_attempts(finished, self.stats)
        attempts = set(real)
        self.now += [(item, None) for i, item in enumerate(finished) if i not in attempts]
        rubric_ix = {i for i in real if finished[i][0]["task"]["domain"] == "rubric"}
        if self.send_judge is not None:
            self._send([finished[i] for i in real if i in rubric_ix])
            real, rubric_ix = [i for i in real if i not in rubric_ix], set()
        if not self.beside:
            items = [finished[i] for i in real]
            if items:
                self.now += zip(items, verify_finished(items, self.judge, self.plan))
            return
        for i in real:
            st, _, gen, _ = item = finished[i]
            if i not in rubric_ix:
                self.pending[self.pool.submit(verify_one, st["task"], gen.completion, self.plan.verify)] = item
        rubric = [finished[i] for i in real if i in rubric_ix]
        if rubric:
            self.now += zip(rubric, verify_finished(rubric, self.judge, self.plan))

    def _send(self, rubric: list[Finished]) -> None:
        """The judge's requests for these rubric attempts into the queue."""
        if not rubric:
            return
        asked = rubric_requests(
            [(st["task"], gen.completion) for st, _, gen, _ in rubric],
            self.plan.verify,
            [req.seed for _, req, _, _ in rubric],
        )
        tickets = self.send_judge([req for req, _ in asked])
        self.judging.update(zip(tickets, ((item, nonce) for item, (_, nonce) in zip(rubric, asked))))

    def is_judging(self, ticket: int) -> bool:
        return ticket in self.judging

    def judged(self, ticket: int, res: GenResult) -> None:
        """The judge answered a request `_send` made: the attempt's verdict."""
        item, nonce = self.judging.pop(ticket)
        self.now.append((item, rubric_verdict(item[0]["task"], nonce, res, self.judge, self.plan.verify)))

    @property
    def busy(self) -> bool:
        return bool(self.pending)

    def take(self, block: bool) -> list[tuple[Finished, dict | None]]:
        """(finished request, verdict or None) for all that are done; with
        `block`, waits for at least one while any is being verified."""
        if block and not self.now and self.pending:
            wait(self.pending, return_when=FIRST_COMPLETED)
        out, self.now = self.now, []
        for f in [f for f in self.pending if f.done()]:
            out.append((self.pending.pop(f), f.result()))
        return out

    def close(self) -> None:
        for f in self.pending:
            f.cancel()
        self.pending.clear()
        self.judging.clear()
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
