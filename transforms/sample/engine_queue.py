"""A queue of requests the engine works through while more are added: what
the `queue` schedule (queued.py) talks to.

`submit` hands requests over and returns a ticket per request; `wait`
returns the (ticket, result) pairs that finished since the last call,
blocking until there is at least one. Optional (VllmQueue has it):
`takes_judge` with `submit(requests, counted=False)`, for the rubric
judge's requests when the judge is the same engine. A backend that can
take requests while it works (vLLM's engine, backends/vllm.py) offers
`open_queue`; for any other, `WaveQueue` sends what was submitted as one
`generate` call at the next `wait`, which is the wave schedule again:
the same attempts, only no overlap.

Beam-free; the scheduler is the only user."""

from __future__ import annotations

from typing import Callable, Protocol

from tasksieve.transforms.backends.base import GenRequest, GenResult
from tasksieve.transforms.sample.attempt_bar import CallProgress, SamplingProgress

OnFinished = Callable[[int, GenResult], None]


class RequestQueue(Protocol):
    def submit(self, requests: list[GenRequest]) -> list[int]: ...

    def wait(self, on_result: OnFinished, block: bool = True) -> list[tuple[int, GenResult]]:
        """Finished (ticket, result) pairs: with `block`, at least one
        while any request is in flight; without, what finished in a short
        while (one engine step), maybe none. `on_result` hears of each as
        it finishes (the attempt cache writes it then)."""
        ...

    @property
    def in_flight(self) -> int: ...

    def close(self) -> None:
        """Give up what is still in flight (the run stops)."""
        ...


class WaveQueue:
    """For a backend with no queue of its own: what was submitted goes out
    as one `generate` call when the scheduler waits (at most `limit`
    requests a call, the rest at the next wait)."""

    def __init__(self, backend, progress: SamplingProgress, limit: int):
        self.backend, self.progress, self.limit = backend, progress, limit
        self.pending: list[tuple[int, GenRequest]] = []
        self.next_ticket = 0

    def submit(self, requests: list[GenRequest]) -> list[int]:
        tickets = list(range(self.next_ticket, self.next_ticket + len(requests)))
        self.next_ticket += len(requests)
        self.pending += zip(tickets, requests)
        return tickets

    @property
    def in_flight(self) -> int:
        return len(self.pending)

    def wait(self, on_result: OnFinished, block: bool = True) -> list[tuple[int, GenResult]]:
        # One `generate` call blocks whatever `block` says: a wave.
        batch, self.pending = self.pending[: self.limit], self.pending[self.limit :]
        if not batch:
            return []
        told = CallProgress(self.progress, self.backend)

        def heard(j: int, res: GenResult) -> None:
            told.result(j)
            on_result(batch[j][0], res)

        results = self.backend.generate([req for _, req in batch], on_result=heard, **told.kwargs())
        told.finish(len(results))
        return [(ticket, res) for (ticket, _), res in zip(batch, results)]

    def close(self) -> None:
        self.pending = []


def open_queue(backend, progress: SamplingProgress, limit: int) -> RequestQueue:
    """The backend's own queue where it has one, else a `WaveQueue`; at
    most `limit` requests in the engine at a time (stage.MAX_WAVE_REQUESTS:
    bounded memory however many a window of tasks asks for)."""
    opener = getattr(backend, "open_queue", None)
    return opener(progress, limit) if callable(opener) else WaveQueue(backend, progress, limit)
