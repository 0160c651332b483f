"""The `vllm` backend: vLLM's offline engine in this process, loaded once
per worker process (see `backends.get_backend`) and reused across bundles.
Each wave is one `generate` call with a distinct seed per request.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Callable

from tasksieve.transforms.console import quiet_engine_start, verbose
from tasksieve.transforms.backends.base import GenRequest, GenResult, ModelLoadError, OnResult


def _cpu_only() -> bool:
    try:
        import torch

        return not torch.cuda.is_available()
    except Exception:
        return True


def configure_vllm_env() -> None:
    """Settings vLLM reads at import time. Set before the first import.

    In-process engine (no engine-core subprocess): starts in seconds on CPU,
    and works inside a Beam worker without a __main__ re-import."""
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # vLLM's CPU warnings (thread binding, LD_PRELOAD hints) are noise for a
    # curation run; real failures still surface as exceptions. --verbose
    # shows its log (transforms/console.py).
    if not verbose():
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
    os.environ.setdefault("DO_NOT_TRACK", "1")


def guard_llvmlite() -> None:
    """Let vLLM load next to numba. vLLM's CPU worker scans every loaded
    module and reads `vars(x).get("kernel")` of each object with a
    `__dict__` (vllm/triton_utils/dispatcher.py); llvmlite's library
    wrapper (loaded with numba, which near dedup's kernels use) answers
    *any* attribute, `__dict__` included, with a C-function wrapper, and the
    model load fails ("'_lib_fn_wrapper' object has no attribute 'get'").
    Dunder names are never C functions, so the wrapper refuses them."""
    lib = getattr(sys.modules.get("llvmlite.binding.ffi"), "lib", None)
    if lib is None or getattr(type(lib), "_dunders_refused", False):
        return  # numba never ran in this process, or the guard is in place
    cls = type(lib)
    lookup = cls.__getattr__

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return lookup(self, name)

    cls.__getattr__ = __getattr__
    cls._dunders_refused = True


def engine_kwargs(model_path: str, sampling, model_cfg, cpu: bool) -> dict:
    """vLLM `LLM(...)` arguments from [model]: every one of
    ModelConfig.ENGINE_FIELDS is passed (tests/backends/test_engine_args.py), those
    left unset (None) keep vLLM's default."""
    dtype = model_cfg.dtype
    if dtype == "auto" and cpu:
        dtype = "float32"  # see ModelConfig.dtype
    kwargs = dict(
        model=model_path,
        dtype=dtype,
        max_model_len=model_cfg.max_model_len,
        max_num_seqs=model_cfg.max_num_seqs,
        max_num_batched_tokens=model_cfg.max_num_batched_tokens,
        tensor_parallel_size=model_cfg.tensor_parallel_size,
        enforce_eager=True,
        seed=sampling.seed,
    )
    for name in ("gpu_memory_utilization", "enable_prefix_caching"):
        if getattr(model_cfg, name) is not None:
            kwargs[name] = getattr(model_cfg, name)
    if cpu:
        # On CPU the KV cache must be sized explicitly; the default takes
        # a fraction of all RAM.
        kwargs["kv_cache_memory_bytes"] = int(model_cfg.kv_cache_gib * 2**30)
    return kwargs


class VllmBackend:
    """vLLM's offline engine, loaded once per process (see `get_backend`)."""

    def __init__(self, model_path: str, model_id: str, sampling, model_cfg):
        configure_vllm_env()
        if not Path(model_path, "config.json").exists():
            raise ModelLoadError(f"model folder {model_path} has no config.json (expected a Hugging Face model folder)")
        quiet_engine_start()  # torch's warnings come with vLLM's import and engine start
        try:
            from vllm import LLM
        except Exception as e:
            raise ModelLoadError(f"vLLM is not importable ({type(e).__name__}: {e}); run the README set-up") from None
        quiet_engine_start()  # again once torch is in: its logging set-up may reset a level
        kwargs = engine_kwargs(model_path, sampling, model_cfg, cpu=_cpu_only())
        kwargs["use_tqdm_on_load"] = verbose()  # its weight-loading bar; tasksieve says "loading model"
        guard_llvmlite()
        try:
            self.llm = LLM(**kwargs)
        except Exception as e:
            raise ModelLoadError(f"vLLM could not load {model_path}: {type(e).__name__}: {e}") from None
        self.tokenizer = self.llm.get_tokenizer()
        self.model_id = model_id
        self.sampling = sampling
        # One renderer (transforms/progress.py): vLLM's own per-wave bar would
        # draw over the sampling bar; shown with --verbose only.
        self.show_progress = verbose() and sys.stderr.isatty()

    def _prompt(self, messages) -> str:
        return self.tokenizer.apply_chat_template(
            [{"role": r, "content": c} for r, c in messages], tokenize=False, add_generation_prompt=True
        )

    # It counts its requests as they finish, inside one long call (a wave):
    # the sampling bar moves while the engine works (attempt_bar.py).
    reports_progress = True

    def generate(
        self,
        requests: list[GenRequest],
        on_result: OnResult | None = None,
        on_progress: Callable[[int], None] | None = None,
    ) -> list[GenResult]:
        from vllm import SamplingParams

        if not requests:
            return []
        s = self.sampling
        prompts = [self._prompt(r.messages) for r in requests]
        params = [
            SamplingParams(n=1, temperature=s.temperature, top_p=s.top_p, max_tokens=s.max_tokens, seed=r.seed)
            for r in requests
        ]
        t0 = time.perf_counter()
        # vLLM draws a bar inside one long engine call (a wave) through the
        # factory it is given: ours relays its counts to the sampling bar.
        use_tqdm = _relay_to(on_progress) if on_progress else self.show_progress
        outputs = self.llm.generate(prompts, params, use_tqdm=use_tqdm)
        elapsed = time.perf_counter() - t0
        # One batched call serves many requests; its wall time is shared out
        # by each request's share of the tokens it processed.
        sizes = [len(o.prompt_token_ids or []) + len(o.outputs[0].token_ids) for o in outputs]
        total = sum(sizes) or 1
        results = []
        for i, (o, size) in enumerate(zip(outputs, sizes)):
            c = o.outputs[0]
            res = GenResult(
                completion=c.text,
                prompt_tokens=len(o.prompt_token_ids or []),
                completion_tokens=len(c.token_ids),
                finish_reason=str(c.finish_reason),
                gen_seconds=elapsed * size / total,
            )
            results.append(res)
            if on_result:
                on_result(i, res)
        return results


class _Relay:
    """Stands in for the tqdm bar `LLM.generate` draws while it runs (it
    takes a bar factory as `use_tqdm`): passes each count of finished
    requests on and draws nothing. Only what vLLM's engine loop touches
    (vllm/entrypoints/common/offline.py: n, postfix, format_dict["elapsed"],
    update, refresh, close); tests/backends/test_vllm_progress.py holds it to a
    real engine."""

    def __init__(self, on_progress: Callable[[int], None], total: int | None = None, **_):
        self.on_progress, self.total, self.n, self.postfix = on_progress, total, 0, ""
        self.t0 = time.perf_counter()

    @property
    def format_dict(self) -> dict:
        return {"elapsed": max(time.perf_counter() - self.t0, 1e-6), "n": self.n, "total": self.total}

    def update(self, n: int = 1) -> None:
        self.n += n
        self.on_progress(n)

    def refresh(self) -> None:
        pass

    def close(self) -> None:
        pass


def _relay_to(on_progress: Callable[[int], None]):
    def factory(*iterable, **kwargs):
        if iterable:
            return iterable[0]  # a bar over prompts being rendered: no requests finish there
        return _Relay(on_progress, **kwargs)

    return factory
