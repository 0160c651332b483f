"""The `openai` backend: any OpenAI-compatible chat server (`vllm serve`,
SGLang, a hosted API).

- Bounded concurrency: at most `concurrency` requests in flight, from a
  thread pool; the `openai` client is thread-safe.
- Timeouts and retries are the `openai` client's own: exponential backoff
  with jitter on 408/409/429/5xx, timeouts and connection errors, honouring
  Retry-After. Not rewritten here.
- A 200 response that is not a chat completion (no `choices`, an HTML page
  from a proxy, text that is not JSON) is treated like a 5xx: retried here
  with exponential backoff and jitter, `max_retries` times.
- A request that still fails after its retries because the server is gone,
  overloaded, hanging or answering nonsense raises `BackendUnavailable`: the
  run stops, with the attempts finished so far already persisted (see
  `on_result`). A request
  the server rejects (400: prompt too long, say) becomes an attempt with
  `error` set: retrying it would fail the same way.
- Token counts come from the response's `usage`; `gen_seconds` is the
  request's latency (requests overlap, so these do not add up to wall time).
"""

from __future__ import annotations

import os
import random
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

from tasksieve.transforms.backends.base import (BackendUnavailable, GenRequest, GenResult, ModelLoadError,
                                           OnResult)


# Backoff between retries of a malformed response: INITIAL * 2^n, capped, with jitter.
INITIAL_BACKOFF_S = 0.5
MAX_BACKOFF_S = 8.0


class MalformedResponse(Exception):
    """A 200 answer that is not a usable chat completion."""


def _count(value) -> int:
    """A token count from `usage`, whatever the server put there."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**40 else 0


def parse_completion(resp, gen_seconds: float) -> GenResult:
    """A GenResult from a chat completion response, or MalformedResponse."""
    choices = getattr(resp, "choices", None)
    if isinstance(choices, list) and not choices:
        raise MalformedResponse("a 200 response with an empty 'choices' list")
    if not isinstance(choices, list):
        if isinstance(resp, (str, bytes)):
            text = resp.decode("utf-8", "replace") if isinstance(resp, bytes) else resp
            raise MalformedResponse(f"a 200 response that is not JSON: {' '.join(text[:60].split())!r}")
        raise MalformedResponse("a 200 response without 'choices'")
    message = getattr(choices[0], "message", None)
    content = getattr(message, "content", None) if message is not None else None
    if message is None or not (content is None or isinstance(content, str)):
        raise MalformedResponse("a 200 response whose first choice has no message text")
    usage = getattr(resp, "usage", None)
    return GenResult(
        completion=content or "",
        prompt_tokens=_count(getattr(usage, "prompt_tokens", 0)),
        completion_tokens=_count(getattr(usage, "completion_tokens", 0)),
        finish_reason=str(getattr(choices[0], "finish_reason", None))[:40],
        gen_seconds=gen_seconds,
    )


def _client(cfg):
    import openai

    # A server without auth accepts any key; the client insists on one.
    key = os.environ.get(cfg.api_key_env) or "EMPTY"
    return openai.OpenAI(base_url=cfg.base_url, api_key=key, timeout=cfg.timeout_s, max_retries=cfg.max_retries)


def served_model(cfg) -> str:
    """The model name to ask for: the configured one, else the only model the
    server lists. Fails with one line when the server cannot be reached."""
    import openai

    if cfg.model:
        return cfg.model
    try:
        models = [m.id for m in _client(cfg).with_options(max_retries=1, timeout=30).models.list()]
    except openai.OpenAIError as e:
        raise ModelLoadError(f"OpenAI-compatible server at {cfg.base_url} is not answering: {type(e).__name__}: {e}") from None
    if len(models) != 1:
        raise ModelLoadError(f"server at {cfg.base_url} serves {models or 'no models'}; set model.openai.model")
    return models[0]


# How often a wait on requests in flight wakes to notice Ctrl-C.
WAKE_S = 0.5


class OpenAIBackend:
    def __init__(self, cfg, model_id: str, sampling):
        self.cfg = cfg
        self.model_id = model_id
        self.sampling = sampling
        self.model = served_model(cfg)
        self.client = _client(cfg)
        self.pool = ThreadPoolExecutor(max_workers=cfg.concurrency, thread_name_prefix="openai")

    def _one(self, req: GenRequest) -> GenResult:
        import openai

        s = self.sampling
        retries = self.cfg.max_retries
        why = ""
        for attempt in range(retries + 1):
            t0 = time.perf_counter()
            try:
                resp = self.client.chat.completions.create(
                    model=self.model,
                    messages=[{"role": r, "content": c} for r, c in req.messages],
                    temperature=s.temperature, top_p=s.top_p, max_tokens=s.max_tokens, seed=req.seed, n=1,
                )
            except (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError) as e:
                # The client already retried with backoff; the server is gone or hopeless.
                raise BackendUnavailable(
                    f"{self.cfg.base_url} failed after {retries} retries: {type(e).__name__}: {e}") from None
            except openai.APIStatusError as e:
                if e.status_code in (408, 409) or e.status_code >= 500:
                    raise BackendUnavailable(f"{self.cfg.base_url}: HTTP {e.status_code} after retries") from None
                return GenResult("", 0, 0, "error", time.perf_counter() - t0,
                                 error=f"HTTP {e.status_code}: {e.message}"[:500])
            except (openai.APIResponseValidationError, ValueError) as e:  # a body that is not JSON
                why = f"a 200 response that cannot be read ({type(e).__name__})"
            else:
                try:
                    return parse_completion(resp, time.perf_counter() - t0)
                except MalformedResponse as e:
                    why = str(e)
            if attempt < retries:
                delay = min(MAX_BACKOFF_S, INITIAL_BACKOFF_S * 2 ** attempt)
                time.sleep(delay * (0.5 + random.random() / 2))
        raise BackendUnavailable(f"{self.cfg.base_url} answered nonsense after {retries} retries: {why}")

    def generate(self, requests: list[GenRequest], on_result: OnResult | None = None) -> list[GenResult]:
        futures = {self.pool.submit(self._one, r): i for i, r in enumerate(requests)}
        results: list[GenResult | None] = [None] * len(requests)
        pending, failure = set(futures), None
        while pending:
            try:
                # Woken twice a second even while every request hangs: a
                # Ctrl-C that the kernel hands to another thread is then
                # still seen here, not only when a request returns.
                done, pending = wait(pending, timeout=WAKE_S, return_when=FIRST_COMPLETED)
            except BaseException:  # Ctrl-C: send nothing more (requests in flight are not waited for)
                for f in pending:
                    f.cancel()
                raise
            for f in done:
                if f.exception() is not None:
                    failure = failure or f.exception()
                    continue
                results[futures[f]] = f.result()
                if on_result:
                    on_result(futures[f], results[futures[f]])
            if failure is not None:
                # Stop queueing; requests already in flight still finish (each
                # is bounded by the timeout) and are reported, so none of the
                # work the server did is thrown away.
                for f in pending:
                    f.cancel()
                for f in pending:
                    if not f.cancelled() and f.exception() is None:
                        results[futures[f]] = f.result()
                        if on_result:
                            on_result(futures[f], results[futures[f]])
                raise failure
        return results  # type: ignore[return-value]
