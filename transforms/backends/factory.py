"""The process's sampling backend, chosen by `[model] backend`.

The engines are imported on first use: a replay run never imports vLLM.
"""

from __future__ import annotations

import threading

from tasksieve.transforms.backends.base import Backend


def _create(model_path: str | None, model_id: str, sampling, model_cfg) -> Backend:
    if model_cfg.backend == "openai":
        from tasksieve.transforms.backends.openai import OpenAIBackend

        return OpenAIBackend(model_cfg.openai, model_id, sampling)
    if model_cfg.backend == "replay":
        from tasksieve.transforms.backends.replay import ReplayBackend

        return ReplayBackend(model_cfg.replay_paths, model_id)
    from tasksieve.transforms.backends.vllm import VllmBackend

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
