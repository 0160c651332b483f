"""The `openai` backend: any OpenAI-compatible chat server (`vllm serve`,
SGLang, a hosted API).

An error is never an attempt. Every request ends in exactly one of:

- a completion: an attempt, verified and cached;
- a retry (408/409/425/429/5xx, no connection, the deadline passed, a reply
  that is not a chat completion or whose text is not text), with exponential
  backoff and jitter, honouring Retry-After; after `max_retries` retries
  `BackendUnavailable`: the run stops (exit 4), resumable;
- `ServerRefused` at once, for statuses no retry mends: 401/403/407 (the API
  key), 404/405/410 (the model name or the base URL), and any status not
  named here (3xx, 402, ...): the run stops (exit 5) with a hint;
- a failed request (`REQUEST_FAILED`, `error` set) for faults of this one
  request: the server rejected it (400/413/414/422/431: a prompt too long,
  say), its reply passed `max_reply_mib` decompressed, its completion holds
  a lone surrogate or passes `max_completion_chars`. Never verified,
  classified or cached; its task is dropped as `generation_failed`, and a
  run where more than `model.max_failed_share` of requests failed does not
  finish (exit 5).

Transport: http_transport.py (a wall-clock deadline over the whole reply,
body included; a cap on the decompressed size). A request in flight longer
than `progress_after_s` prints one line naming the server and the wait.
"""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

from tasksieve.transforms.backends.base import (
    REQUEST_FAILED,
    BackendUnavailable,
    GenRequest,
    GenResult,
    ModelLoadError,
    OnResult,
    ServerRefused,
)
from tasksieve.transforms.backends.http_transport import CONNECT, STATUS, TIMEOUT, TOO_LARGE, ReplyError, request

# Backoff between retries: INITIAL * 2^n, capped, with jitter; a Retry-After
# is honoured up to the cap.
INITIAL_BACKOFF_S = 0.5
MAX_BACKOFF_S = 8.0

KEY_STATUSES = frozenset({401, 403, 407})
NAME_STATUSES = frozenset({404, 405, 410})
# The request itself is at fault (too long, a parameter the server does not take).
REJECTED_STATUSES = frozenset({400, 413, 414, 422, 431})
RETRIED_STATUSES = frozenset({408, 409, 425, 429})


class MalformedResponse(Exception):
    """A 2xx answer that is not a usable chat completion (retried)."""


class CompletionRejected(Exception):
    """A chat completion whose text cannot be an attempt (this request fails)."""


def _count(value) -> int:
    """A token count from `usage`, whatever the server put there."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**40 else 0


def _is_text(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def parse_completion(body: bytes, gen_seconds: float, max_chars: int = 1_000_000) -> GenResult:
    """A GenResult from a chat completion body; MalformedResponse for a body
    that is not one, CompletionRejected for a completion that is not text."""
    try:
        resp = json.loads(body)
    except (ValueError, RecursionError):
        text = body[:200].decode("utf-8", "replace")
        raise MalformedResponse(f"a 200 response that is not JSON: {' '.join(text[:60].split())!r}") from None
    if not isinstance(resp, dict):
        raise MalformedResponse(f"a 200 response that is a JSON {type(resp).__name__}, not an object")
    choices = resp.get("choices")
    if isinstance(choices, list) and not choices:
        raise MalformedResponse("a 200 response with an empty 'choices' list")
    if not isinstance(choices, list):
        raise MalformedResponse("a 200 response without 'choices'")
    choice = choices[0] if isinstance(choices[0], dict) else {}
    message = choice.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(message, dict) or not (content is None or isinstance(content, str)):
        raise MalformedResponse("a 200 response whose first choice has no message text")
    content = content or ""
    if not _is_text(content):
        raise CompletionRejected("the completion holds a lone surrogate (e.g. \\ud800), which is not valid text")
    if len(content) > max_chars:
        raise CompletionRejected(
            f"the completion is {len(content):,} characters, over the {max_chars:,} cap "
            "(model.openai.max_completion_chars)"
        )
    usage = resp.get("usage") if isinstance(resp.get("usage"), dict) else {}
    reason = choice.get("finish_reason")
    if not (isinstance(reason, str) and _is_text(reason)):
        reason = "None" if reason is None else "other"
    return GenResult(
        completion=content,
        prompt_tokens=_count(usage.get("prompt_tokens")),
        completion_tokens=_count(usage.get("completion_tokens")),
        finish_reason=reason[:40],
        gen_seconds=gen_seconds,
    )


def _headers(cfg) -> dict:
    # A server without auth accepts any key; some proxies insist on one.
    key = os.environ.get(cfg.api_key_env) or "EMPTY"
    return {"Authorization": f"Bearer {key}", "User-Agent": "tasksieve"}


def _reply_cap(cfg) -> int:
    return int(cfg.max_reply_mib * 2**20)


class _NotSent(Exception):
    """A request held back because another one stopped the run."""


def refusal(cfg, model: str | None, status: int, message: str) -> str:
    """One line for a status no retry mends, with what to check."""
    if status in KEY_STATUSES:
        hint = f"check the API key in ${cfg.api_key_env} (model.openai.api_key_env)"
    elif status in NAME_STATUSES:
        hint = (
            f"check the model name ({model!r}, model.openai.model) and the base URL ({cfg.base_url}; "
            "it usually ends in /v1)"
        )
    elif 300 <= status < 400:
        hint = "the server redirects; set model.openai.base_url (--base-url) to where it points"
    else:
        hint = "this status is not one tasksieve retries"
    return f"{cfg.base_url} refused the request with {message[:240]}; {hint}"


def served_model(cfg) -> str:
    """The model name to ask for: the configured one, else the only model the
    server lists. Fails with one line when the server cannot be reached."""
    if cfg.model:
        return cfg.model
    try:
        reply = request(
            "GET", cfg.base_url.rstrip("/") + "/models", None, _headers(cfg), min(cfg.timeout_s, 30), _reply_cap(cfg)
        )
        listed = json.loads(reply.body)
        models = [m["id"] for m in listed["data"] if isinstance(m, dict) and isinstance(m.get("id"), str)]
    except ReplyError as e:
        if e.kind == STATUS and e.status not in RETRIED_STATUSES and e.status < 500:
            raise ModelLoadError(refusal(cfg, None, e.status, str(e))) from None
        raise ModelLoadError(f"OpenAI-compatible server at {cfg.base_url} is not answering: {e}") from None
    except (ValueError, RecursionError, KeyError, TypeError):
        raise ModelLoadError(
            f"server at {cfg.base_url} answered /models with something that is not a model list; set model.openai.model"
        ) from None
    if len(models) != 1 or not _is_text(models[0]):
        shown = [m[:80] for m in models[:5] if _is_text(m)]
        raise ModelLoadError(f"server at {cfg.base_url} serves {shown or 'no models'}; set model.openai.model")
    return models[0]


# How often a wait on requests in flight wakes to notice Ctrl-C and slow requests.
WAKE_S = 0.5
# How long a wait that must not block (verification runs beside it) looks.
POLL_S = 0.02


class OpenAIBackend:
    def __init__(self, cfg, model_id: str, sampling):
        self.cfg = cfg
        self.model_id = model_id
        self.sampling = sampling
        self.model = served_model(cfg)
        self.url = cfg.base_url.rstrip("/") + "/chat/completions"
        self.pool = ThreadPoolExecutor(max_workers=cfg.concurrency, thread_name_prefix="openai")
        self._started: dict[int, float] = {}  # request -> when its current try began
        self._lock = threading.Lock()
        self._last_notice = 0.0

    def _failed(self, why: str, t0: float) -> GenResult:
        return GenResult("", 0, 0, REQUEST_FAILED, time.monotonic() - t0, error=why[:500])

    def _one(self, key: int, req: GenRequest, stop: threading.Event) -> GenResult:
        try:
            return self._tries(key, req, stop)
        except (ServerRefused, BackendUnavailable):
            # The run stops: the requests still queued behind this one are
            # not sent (the pool's threads would take them before generate
            # hears of this, and a busy machine hears late).
            stop.set()
            raise

    def _tries(self, key: int, req: GenRequest, stop: threading.Event) -> GenResult:
        s, cfg = self.sampling, self.cfg
        body = {
            "model": self.model,
            "messages": [{"role": r, "content": c} for r, c in req.messages],
            "temperature": s.temperature,
            "top_p": s.top_p,
            "max_tokens": s.max_tokens,
            "seed": req.seed,
            "n": 1,
        }
        why = ""
        nonsense = False
        for attempt in range(cfg.max_retries + 1):
            if stop.is_set():
                raise _NotSent()
            t0 = time.monotonic()
            with self._lock:
                self._started[key] = t0
            wait_s = None
            try:
                reply = request("POST", self.url, body, _headers(cfg), cfg.timeout_s, _reply_cap(cfg))
                return parse_completion(reply.body, time.monotonic() - t0, cfg.max_completion_chars)
            except ReplyError as e:
                if e.kind == TOO_LARGE:
                    return self._failed(f"{str(e)} (model.openai.max_reply_mib)", t0)
                if e.kind == STATUS and e.status in REJECTED_STATUSES:
                    return self._failed(str(e), t0)
                if e.kind == STATUS and not (e.status in RETRIED_STATUSES or e.status >= 500):
                    raise ServerRefused(refusal(cfg, self.model, e.status, str(e))) from None
                why, wait_s, nonsense = str(e), e.retry_after, e.kind not in (CONNECT, TIMEOUT, STATUS)
            except MalformedResponse as e:
                why, nonsense = str(e), True
            except CompletionRejected as e:
                return self._failed(str(e), t0)
            finally:
                with self._lock:
                    self._started.pop(key, None)
            if attempt < cfg.max_retries:
                delay = min(MAX_BACKOFF_S, INITIAL_BACKOFF_S * 2**attempt) * (0.5 + random.random() / 2)
                time.sleep(min(MAX_BACKOFF_S, max(delay, wait_s or 0.0)))
        if nonsense:
            raise BackendUnavailable(f"{cfg.base_url} answered nonsense after {cfg.max_retries} retries: {why}")
        raise BackendUnavailable(f"{cfg.base_url} failed after {cfg.max_retries} retries: {why}")

    def _notice_slow(self) -> None:
        """One line when a request has been in flight past progress_after_s
        (and again each such period while it lasts): a silent run is
        indistinguishable from a dead one."""
        after = self.cfg.progress_after_s
        now = time.monotonic()
        with self._lock:
            starts = list(self._started.values())
        if not starts or now - self._last_notice < after:
            return
        oldest = now - min(starts)
        if oldest >= after:
            self._last_notice = now
            print(
                f"tasksieve: still waiting on {self.cfg.base_url}: {len(starts)} request(s) in flight, the oldest "
                f"for {oldest:.0f} s (each is cut off at {self.cfg.timeout_s:g} s, model.openai.timeout_s)",
                file=sys.stderr,
                flush=True,
            )

    def generate(self, requests: list[GenRequest], on_result: OnResult | None = None) -> list[GenResult]:
        """The requests' results, in order: the queue below, drained."""
        queue = PoolQueue(self)
        tickets = queue.submit(requests)
        results: dict[int, GenResult] = {}

        def heard(ticket: int, res: GenResult) -> None:
            results[ticket] = res
            if on_result:
                on_result(ticket - tickets[0], res)

        while queue.in_flight:
            queue.wait(heard)
        if queue.stop.is_set() or len(results) < len(tickets):  # never without a failure raised in wait
            raise BackendUnavailable(f"{self.cfg.base_url}: requests held back after a stop")
        return [results[t] for t in tickets]

    def open_queue(self, progress, limit: int) -> "PoolQueue":
        """A queue the scheduler tops up while requests are in flight
        (transforms/sample/queued.py): the server always has `concurrency`
        requests to work on, not a wave's last few. `limit` is not needed:
        the pool sends at most `concurrency` at a time, and what waits holds
        only requests already in memory."""
        return PoolQueue(self, progress)


class PoolQueue:
    """engine_queue.RequestQueue over the backend's thread pool: each
    request is a future; `wait` returns those that finished. Failures are
    as in the module docstring: a request that stops the run cancels what
    was not sent, lets what is in flight finish (each bounded by the
    deadline) and reports it, so no work the server did is thrown away,
    then raises."""

    def __init__(self, backend: OpenAIBackend, progress=None):
        self.backend, self.progress = backend, progress
        self.stop = threading.Event()
        self.futures: dict = {}  # future -> ticket
        self.next_ticket = 0

    def submit(self, requests: list[GenRequest]) -> list[int]:
        tickets = list(range(self.next_ticket, self.next_ticket + len(requests)))
        self.next_ticket += len(requests)
        b = self.backend
        for t, r in zip(tickets, requests):
            self.futures[b.pool.submit(b._one, (id(self), t), r, self.stop)] = t
        return tickets

    @property
    def in_flight(self) -> int:
        return len(self.futures)

    def wait(self, on_result, block: bool = True) -> list[tuple[int, GenResult]]:
        out: list[tuple[int, GenResult]] = []
        while self.futures and not out:
            try:
                # Woken twice a second even while every request hangs: a
                # Ctrl-C that the kernel hands to another thread is then
                # still seen here, not only when a request returns.
                done, _ = wait(set(self.futures), timeout=WAKE_S if block else POLL_S, return_when=FIRST_COMPLETED)
            except BaseException:  # Ctrl-C: send nothing more (requests in flight are not waited for)
                self.close()
                raise
            self.backend._notice_slow()
            failure = None
            for f in done:
                ticket = self.futures.pop(f)
                if isinstance(f.exception(), _NotSent):
                    continue  # held back after another request stopped the run: that one's error is raised
                if f.exception() is not None:
                    failure = failure or f.exception()
                    continue
                out.append((ticket, f.result()))
            if failure is not None:
                for f in self.futures:
                    f.cancel()
                for f, ticket in self.futures.items():
                    if not f.cancelled() and f.exception() is None:
                        out.append((ticket, f.result()))
                self.futures.clear()
                self._tell(out, on_result)
                raise failure
            if not block:
                break
        self._tell(out, on_result)
        return out

    def _tell(self, out, on_result) -> None:
        for ticket, res in out:
            on_result(ticket, res)
            if self.progress is not None:
                self.progress.generated(1)

    def close(self) -> None:
        self.stop.set()
        for f in self.futures:
            f.cancel()
        self.futures.clear()
