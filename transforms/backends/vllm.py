"""The `vllm` backend: vLLM's offline engine in this process, loaded once
per worker process (see `backends.get_backend`) and reused across bundles.
Every request has its own seed. The engine is stepped here, not through
`LLM.generate`, so requests can join while it works: `generate` and the
sampling queue (`open_queue`, transforms/sample/queued.py) share it.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Callable

from tasksieve.transforms.console import quiet_engine_start, verbose
from tasksieve.transforms.backends.base import REQUEST_FAILED, GenRequest, GenResult, ModelLoadError, OnResult


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
        # On the CPU the engine's threads take every core: work beside it
        # (verification) would slow each of its steps more than it saves.
        self.shares_cpu = _cpu_only()
        kwargs = engine_kwargs(model_path, sampling, model_cfg, cpu=self.shares_cpu)
        kwargs["use_tqdm_on_load"] = verbose()  # its weight-loading bar; tasksieve says "loading model"
        guard_llvmlite()
        try:
            self.llm = LLM(**kwargs)
        except Exception as e:
            raise ModelLoadError(f"vLLM could not load {model_path}: {type(e).__name__}: {e}") from None
        self.tokenizer = self.llm.get_tokenizer()
        self.model_id = model_id
        self.sampling = sampling
        self._engine = _Engine(self)

    def _prompt(self, messages) -> str:
        return self.tokenizer.apply_chat_template(
            [{"role": r, "content": c} for r, c in messages], tokenize=False, add_generation_prompt=True
        )

    # It tells of each request as it finishes, inside one long call: the
    # sampling bar moves while the engine works (attempt_bar.py).
    reports_progress = True

    def generate(
        self,
        requests: list[GenRequest],
        on_result: OnResult | None = None,
        on_progress: Callable[[int], None] | None = None,
    ) -> list[GenResult]:
        """The requests' results, in order. Their requests join whatever
        the engine is running already (an open queue's: a rubric judge
        call during queued sampling), which keeps going meanwhile."""
        if not requests:
            return []
        results: dict[str, GenResult] = {}
        index: dict[str, int] = {}

        def finished(rid: str, res: GenResult) -> None:
            results[rid] = res
            if on_progress:
                on_progress(1)
            if on_result:
                on_result(index[rid], res)

        ids = self._engine.submit(requests, finished)
        index.update((rid, i) for i, rid in enumerate(ids))
        try:
            while len(results) < len(ids):
                self._engine.step()
        except BaseException:
            self._engine.abort([rid for rid in ids if rid not in results])
            raise
        return [results[rid] for rid in ids]

    def open_queue(self, progress, limit: int) -> "VllmQueue":
        """A queue the scheduler tops up while the engine works
        (transforms/sample/queued.py), at most `limit` of its requests in
        the engine at a time."""
        return VllmQueue(self._engine, progress, limit)


class _Engine:
    """vLLM's engine driven step by step, shared by every caller in the
    process: each request has a callback that hears its result when it
    finishes, whoever's step finished it.

    `gen_seconds`: each step's time is shared equally by the requests in
    flight during it, so the attempts' times add up to the engine's time
    (one batched step serves them all)."""

    def __init__(self, backend: VllmBackend):
        self.backend = backend
        self.callbacks: dict[str, Callable[[str, GenResult], None]] = {}
        self.clock = 0.0  # engine seconds per request in flight, summed over steps
        self.busy_seconds = 0.0  # in steps, whoever made them
        self.born: dict[str, float] = {}
        self.ready: list[tuple[str, GenResult]] = []  # refused at submit, told at the next step
        self.refused = 0

    def submit(self, requests: list[GenRequest], callback: Callable[[str, GenResult], None]) -> list[str]:
        from vllm import SamplingParams

        s, b = self.backend.sampling, self.backend
        prompts = [b._prompt(r.messages) for r in requests]
        params = [
            SamplingParams(n=1, temperature=s.temperature, top_p=s.top_p, max_tokens=s.max_tokens, seed=r.seed)
            for r in requests
        ]
        ids = []
        for prompt, param in zip(prompts, params):
            # One at a time: vLLM refuses a whole call for one prompt over
            # max_model_len (VLLMValidationError), and one hostile attempt
            # quoted into a judge prompt would fail every attempt of its
            # wave, or end a queued run. Refused, it fails alone: a failed
            # request (its task: generation_failed, or judge_failed).
            try:
                # `enqueue` renders and adds it as `generate` would; it returns
                # the engine's internal id, "<id>-<random>", and results carry <id>.
                rid = b.llm.enqueue([prompt], [param], use_tqdm=False)[0].split("-", 1)[0]
            except Exception as e:  # noqa: BLE001 - vLLM's validation errors share no base with ValueError
                if not _refused_prompt(e):
                    raise
                self.refused += 1
                rid = f"refused-{self.refused}"
                self.ready.append(
                    (rid, GenResult("", 0, 0, REQUEST_FAILED, 0.0, error=f"{type(e).__name__}: {e}"[:500]))
                )
            self.callbacks[rid] = callback
            self.born[rid] = self.clock
            ids.append(rid)
        return ids

    def step(self) -> None:
        if self.ready:  # requests refused at submit: their results, before any engine step
            ready, self.ready = self.ready, []
            for rid, res in ready:
                self.born.pop(rid, None)
                callback = self.callbacks.pop(rid, None)
                if callback is not None:
                    callback(rid, res)
            return
        engine = self.backend.llm.llm_engine
        if not engine.has_unfinished_requests():
            lost = list(self.callbacks)
            self.callbacks.clear()
            raise RuntimeError(f"vLLM's engine holds none of the {len(lost)} requests still awaited")
        in_flight = max(len(self.callbacks), 1)
        t0 = time.perf_counter()
        outputs = engine.step()
        took = time.perf_counter() - t0
        self.busy_seconds += took
        self.clock += took / in_flight
        for o in outputs:
            if not o.finished:
                continue
            callback = self.callbacks.pop(o.request_id, None)
            born = self.born.pop(o.request_id, self.clock)
            if callback is None:
                continue  # not ours (an aborted request's last word)
            c = o.outputs[0]
            callback(
                o.request_id,
                GenResult(
                    completion=c.text,
                    prompt_tokens=len(o.prompt_token_ids or []),
                    completion_tokens=len(c.token_ids),
                    finish_reason=str(c.finish_reason),
                    gen_seconds=self.clock - born,
                ),
            )

    def abort(self, ids: list[str]) -> None:
        for rid in ids:
            self.callbacks.pop(rid, None)
            self.born.pop(rid, None)
        gone = set(ids)
        self.ready = [(rid, res) for rid, res in self.ready if rid not in gone]
        ids = [rid for rid in ids if not rid.startswith("refused-")]
        if ids:
            self.backend.llm.llm_engine.abort_request(ids)


class VllmQueue:
    """engine_queue.RequestQueue over the shared engine: requests are added
    to its running batch at once (up to `limit` in the engine; the rest
    wait here for room); `wait` steps it until some of ours finish."""

    # The rubric judge's requests may join this queue when the judge is the
    # sampler itself (verify_behind.py): they share the running batch
    # instead of a blocking `generate` that stops the queue's top-ups.
    takes_judge = True

    def __init__(self, engine: _Engine, progress, limit: int):
        self.engine, self.progress, self.limit = engine, progress, max(limit, 1)
        self.tickets: dict[str, int] = {}
        self.backlog: list[tuple[int, GenRequest]] = []
        self.done: list[tuple[int, GenResult]] = []
        self.quiet: set[int] = set()  # tickets the attempt bar does not count (the judge's)
        self.next_ticket = 0

    def submit(self, requests: list[GenRequest], counted: bool = True) -> list[int]:
        """Tickets for `requests`; `counted=False`: not attempts (the
        judge's), the bar's generated count leaves them out."""
        tickets = list(range(self.next_ticket, self.next_ticket + len(requests)))
        self.next_ticket += len(requests)
        self.backlog += zip(tickets, requests)
        if not counted:
            self.quiet.update(tickets)
        self._feed()
        return tickets

    def _feed(self) -> None:
        room = self.limit - len(self.tickets)
        if room <= 0 or not self.backlog:
            return
        go, self.backlog = self.backlog[:room], self.backlog[room:]
        self.tickets.update(zip(self.engine.submit([req for _, req in go], self._finished), (t for t, _ in go)))

    def _finished(self, rid: str, res: GenResult) -> None:
        ticket = self.tickets.pop(rid)
        self.done.append((ticket, res))
        if ticket in self.quiet:
            self.quiet.discard(ticket)
        else:
            self.progress.generated(1)

    @property
    def busy_seconds(self) -> float:
        """The engine's time in steps so far: a judge call's steps serve
        the queue's requests too."""
        return self.engine.busy_seconds

    @property
    def in_flight(self) -> int:
        # Finished but not yet handed over counts too: a judge's `generate`
        # steps the engine and may finish every one of ours.
        return len(self.tickets) + len(self.backlog) + len(self.done)

    def wait(self, on_result, block: bool = True) -> list[tuple[int, GenResult]]:
        while self.tickets and not (self.done and block):
            self.engine.step()
            self._feed()
            if not block:
                break
        done, self.done = self.done, []
        for ticket, res in done:
            on_result(ticket, res)
        return done

    def close(self) -> None:
        self.engine.abort(list(self.tickets))
        self.tickets.clear()
        self.backlog.clear()
        self.quiet.clear()


def _refused_prompt(e: Exception) -> bool:
    """vLLM's refusal of one request (a prompt over max_model_len, bad
    parameters), as opposed to an engine that failed."""
    try:
        from vllm.exceptions import VLLMValidationError
    except ImportError:  # an older vLLM: its refusals are ValueErrors
        return isinstance(e, ValueError)
    return isinstance(e, (VLLMValidationError, ValueError))
