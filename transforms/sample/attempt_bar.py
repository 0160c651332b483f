"""What the sampling stage reports as it goes, and the bar that shows it.

Counted in attempts, not tasks: tasks finish in waves (every task's first
wave ends at about the same time), so a task count sits near zero for
most of the first wave and then jumps, and a rate taken from it promised
an hour for a four-minute run (issue 47). Attempts finish one by one while
the engine works (vLLM reports each finished request, backends/vllm.py),
so their rate is steady from the first seconds.

The bar's total is a ceiling: k attempts for every task still undecided
plus the attempts already asked for. When an adaptive policy decides a task
early, the attempts it never asks for leave the total, so the ETA can only
shrink towards the truth; under `fixed` it is exact from the start.
Attempts re-used from the cache count as done but not towards the rate
(tqdm's `initial`), and the rate runs from the first request to the engine,
not from when the bar was drawn (the engine start-up is not sampling time).

Beam-free; transform.py keeps one bar per worker process."""

from __future__ import annotations

import threading


class SamplingProgress:
    """What `sample_tasks` tells as it goes; this one listens to nothing."""

    def generated(self, n: int) -> None:
        """n attempts came back from the engine (or failed there)."""

    def reused(self, n: int) -> None:
        """n attempts were taken from the attempt cache: no engine time."""

    def decided(self, asked: int) -> None:
        """A task is decided after `asked` attempts were asked for (0: it
        needed no sampling, e.g. dropped by the judge gate)."""


class CallProgress:
    """One engine call's share of the progress. A backend that counts its
    requests while the call runs says so (`reports_progress`: vLLM, as its
    engine steps) and is given `on_progress`; any other
    is counted by the results it hands over (`on_result`). What was never
    told is told when the call returns, so every request counts once."""

    def __init__(self, progress: SamplingProgress, backend):
        self.progress = progress
        self.live = bool(getattr(backend, "reports_progress", False))
        self.told, self.heard = 0, set()

    def kwargs(self) -> dict:
        return {"on_progress": self.tell} if self.live else {}

    def tell(self, n: int) -> None:
        self.told += n
        self.progress.generated(n)

    def result(self, j: int) -> None:
        if not self.live and j not in self.heard:
            self.heard.add(j)
            self.tell(1)

    def finish(self, answered: int) -> None:
        if self.told < answered:
            self.tell(answered - self.told)


class AttemptBar(SamplingProgress):
    """A tqdm bar (transforms/progress.py, the one renderer) over `tasks`
    tasks of at most `k` attempts each. Thread-safe: the groups a worker
    process samples share it."""

    def __init__(self, tasks: int, k: int, desc: str = "sampling+verifying"):
        from tasksieve.transforms.progress import bar

        self.k, self.tasks, self.done_tasks, self.asked = k, tasks, 0, 0
        self.bar = bar(tasks * k, desc, "attempt")
        self.lock = threading.Lock()
        self.started = False
        self._postfix()

    def start_clock(self) -> None:
        """The first request goes to the engine now: the rate runs from here."""
        with self.lock:
            if not self.started and self.bar is not None:
                self.started = True
                self.bar.start_t = self.bar.last_print_t = self.bar._time()
                self.bar.refresh()

    def generated(self, n: int) -> None:
        with self.lock:
            if self.bar is not None:
                self.bar.update(n)

    def reused(self, n: int) -> None:
        with self.lock:
            if self.bar is None:
                return
            self.bar.initial += n  # done, but took no engine time: not in the rate
            self.bar.update(n)

    def decided(self, asked: int) -> None:
        with self.lock:
            if self.bar is None:
                return
            self.done_tasks += 1
            self.asked += asked
            undecided = self.tasks - self.done_tasks
            # The ceiling: every attempt asked so far, and k for each task left.
            self.bar.total = max(self.asked + undecided * self.k, self.bar.n)
            self._postfix()
            if self.done_tasks >= self.tasks:
                self.close()

    def close(self) -> None:
        if self.bar is None:
            return
        from tasksieve.transforms.progress import log

        self.bar.refresh()
        log.info("%s", self.bar)  # the bar's last state, for the log file
        self.bar.close()
        self.bar = None

    @property
    def closed(self) -> bool:
        return self.bar is None

    def _postfix(self) -> None:
        self.bar.set_postfix_str(f"{self.done_tasks}/{self.tasks} tasks decided", refresh=False)
