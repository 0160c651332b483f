"""Stages `sample` and `verify`: attempts per task, in waves, until each
task's keep/drop decision is made (see policy.py), then `classify`.

Tasks arrive in batches; each wave of a batch is one engine call with every
undecided task's next attempts in it, so the engine always sees a large
batch. Each wave is verified as soon as it is generated (one
`verify_attempts` call: sandboxes in parallel, one judge batch), because the
next wave depends on the verdicts.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator


from tasksieve.schemas.config import BandConfig, JudgeConfig, SamplingConfig, VerifyConfig
from tasksieve.schemas.rows import Task
from tasksieve.transforms.sample.attempt_cache import (
    CacheWriter,
    cache_record,
)
from tasksieve.transforms.backends.base import NOT_RECORDED, REQUEST_FAILED, Backend, GenRequest, GenResult
from tasksieve.transforms.sample.attempt_bar import CallProgress, SamplingProgress
from tasksieve.transforms.sample.classify import classify
from tasksieve.transforms.stage import drop_record
from tasksieve.transforms.sample.policy import Policy, attempt_seed, next_attempts, posterior_interval
from tasksieve.transforms.verify.verifiers import VERIFIABLE, verify_attempts

# Tags of the pairs this stage emits (see transforms/stage.py).
ATTEMPT_TAG = "attempt"
RESULT_TAG = "result"
STAGE = "sample"
# Most requests of a wave built and held at once: a wave larger than this
# (tasks_per_batch x attempts) is sent in slices of it, one after another,
# before the next wave is decided, so the decisions are the same.
MAX_WAVE_REQUESTS = 4096


@dataclass(frozen=True)
class SamplePlan:
    """What the sampling stage needs to know, picklable for Beam workers: the
    run's identity plus the config sections themselves (one home for every
    setting; nothing is copied field by field)."""

    run_id: str
    model_id: str
    sampler_key: str
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    band: BandConfig = field(default_factory=BandConfig)
    verify: VerifyConfig = field(default_factory=VerifyConfig)
    # Where finished generations persist (transforms/sample/attempt_cache.py); None:
    # nowhere (replayed attempts, probes).
    cache_dir: str | None = None
    # The rubric judge's gate (transforms/verify/judge/gate.py) and the
    # labels of a --graded file, {task_id: graded attempts}.
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    graded: dict | None = None
    # `predicted` mode: curation.duckdb of earlier runs (prior_history.py).
    history_db: str | None = None

    @property
    def mode(self) -> str:
        return self.sampling.mode

    @property
    def k(self) -> int:
        return self.sampling.k

    @property
    def policy(self) -> Policy:
        s, b = self.sampling, self.band
        return Policy(
            s.mode,
            s.k,
            tuple(s.waves),
            b.min_pass_rate,
            b.max_pass_rate,
            s.bayes.prior_a,
            s.bayes.prior_b,
            s.bayes.confidence,
        )


def needs_no_sampling(task: dict) -> dict | None:
    """The task marked dropped if no verifier can judge its attempts."""
    if task["domain"] in VERIFIABLE:
        return None
    return drop_record(
        task,
        STAGE,
        "no_verifier",
        {"domain": task["domain"], "why": f"no {task['domain']} verifier is available; not sampled, nothing spent"},
    )


def messages_for(task: dict, plan: SamplePlan) -> tuple:
    system = plan.sampling.system_prompts.get(task["domain"], plan.sampling.system_prompt)
    return (("system", system), ("user", task["prompt"]))


@dataclass
class SamplingStats:
    """Where a worker's sampling time went: engine_seconds inside
    `generate`, wall_seconds in the whole stage (verification included)."""

    engine_seconds: float = 0.0
    wall_seconds: float = 0.0
    engine_calls: int = 0
    generated: int = 0
    reused: int = 0
    # Requests that got no usable completion (REQUEST_FAILED): not attempts.
    failed: int = 0
    # Why the first of them failed (text: read_stats keeps the first one seen).
    first_failure: str = ""


def _from_cache(rec: dict) -> GenResult:
    return GenResult(
        rec["completion"],
        rec["prompt_tokens"],
        rec["completion_tokens"],
        rec["finish_reason"],
        rec["gen_seconds"],
        None,
    )


def checked(res: GenResult) -> GenResult:
    """The result, or a failed request when its completion is not text (a
    lone surrogate, not a string), whatever backend produced it: such text
    cannot be verified, stored or cached."""
    text = res.completion
    try:
        ok = isinstance(text, str) and (text.encode("utf-8") is not None)
    except UnicodeEncodeError:
        ok = False
    if ok:
        return res
    return GenResult(
        "",
        0,
        0,
        REQUEST_FAILED,
        res.gen_seconds,
        error="the completion is not valid text (a lone surrogate such as \\ud800, or not a string)",
    )


def is_generation(res: GenResult) -> bool:
    """Whether a backend's answer is an attempt that may be cached: not a
    failed request, not a replay miss, not an error of any kind."""
    return res.error is None and res.finish_reason not in (NOT_RECORDED, REQUEST_FAILED, "error")


def sample_tasks(
    tasks: list[Task],
    backend: Backend,
    plan: SamplePlan,
    progress: SamplingProgress | None = None,
    cache: CacheWriter | None = None,
    stats: SamplingStats | None = None,
    judge: Backend | None = None,
    cached: dict[str, list[dict]] | None = None,
    predictor=None,
) -> Iterator[tuple[str, dict]]:
    """Yield ("attempt", row) for every attempt and ("result", row) for every
    task once decided. `judge` scores rubric attempts (default: `backend`).
    Beam-free: the unit tests drive it directly.

    `cached` maps a content hash to generations of earlier runs for this model
    and sampler (attempt_cache.py). Those attempts are re-verified, not
    regenerated; new generations go to `cache` as each one finishes.

    `predictor` (mode `predicted`, prior_history.OnlinePredictor) gives each
    task its stop points before its first attempt, from tasks decided
    before this batch, and learns from this batch once it is decided.

    `progress` (attempt_bar.py) hears of every attempt as it comes back and
    of every task once decided."""
    policy = plan.policy
    progress = progress or SamplingProgress()
    judge = default_judge(backend, judge)
    stats = stats if stats is not None else SamplingStats()
    t_start = time.perf_counter()
    state = _initial_state(tasks, cached or {})
    if plan.mode == "predicted":
        predictor = plan_predictions(list(state.values()), plan, predictor)
    while True:
        wave: list[tuple[dict, int]] = []  # (task state, how many more attempts)
        for st in state.values():
            if st["done"]:
                continue
            more = more_attempts(st, policy)
            if more == 0:
                yield RESULT_TAG, finish_task(st, plan, progress)
                continue
            st["asked"] += more
            wave.append((st, more))
        if not wave:
            break
        for piece in _slices(wave, MAX_WAVE_REQUESTS):
            yield from _run_wave(piece, backend, judge, plan, cache, stats, progress)
    learn(predictor, list(state.values()))
    stats.wall_seconds += time.perf_counter() - t_start


def more_attempts(st: dict, policy: Policy) -> int:
    """How many attempts the task gets next, once every attempt asked so
    far is counted; 0: it is decided. Per task, from its own outcomes (and
    stops set before its first attempt): so the wave and the queue
    schedulers make the same decisions."""
    return 0 if st.get("exhausted") else next_attempts(policy, st["n"], st["pass"], st.get("stops"))


def finish_task(st: dict, plan: SamplePlan, progress: SamplingProgress) -> dict:
    """The task's result row; the bar hears of it."""
    st["done"] = True
    progress.decided(st["asked"])
    return _result(st, plan)


def learn(predictor, batch: list[dict]) -> None:
    """`predicted` mode: the predictor learns from a decided batch, in the
    batch's order (not the order its tasks were decided in, which differs
    between schedules), so the next batch's predictions do not depend on
    the schedule."""
    if predictor is None:
        return
    for st in batch:
        if st["done"] and not st.get("failed"):
            predictor.observe(st["task"], st["pass"], st["n"])


def plan_predictions(state: list[dict], plan: SamplePlan, predictor):
    """`predicted` mode: each task's stop points before its first attempt,
    from the tasks decided before this batch (prior_history.py). Returns
    the predictor (a fresh one when none was given)."""
    if predictor is None:
        from tasksieve.transforms.sample.prior_history import OnlinePredictor

        s = plan.sampling
        predictor = OnlinePredictor(s.k, s.predicted.keep_signal, s.bayes.prior_a, s.bayes.prior_b)
    for st, (stops, predicted) in zip(state, predictor.plan([st["task"] for st in state])):
        st["stops"], st["predicted"] = stops, predicted
    return predictor


def request_for(st: dict, idx: int, plan: SamplePlan) -> GenRequest:
    """Attempt `idx` of a task: its seed depends on the task and the index
    only, never on the batch it is sent in."""
    h = st["task"]["content_hash"]
    return GenRequest(
        messages=messages_for(st["task"], plan),
        seed=attempt_seed(plan.sampling.seed, h, idx),
        content_hash=h,
        attempt_idx=idx,
    )


def cached_generation(st: dict, req: GenRequest) -> dict | None:
    """The cache record of this very attempt (same index and seed), if any."""
    rec = st["cached"].get(req.attempt_idx)
    if rec is not None and rec.get("seed") != req.seed:
        return None  # not this attempt's seed: an entry moved from elsewhere, regenerated
    return rec


def _slices(wave: list[tuple[dict, int]], size: int) -> Iterator[list[tuple[dict, int]]]:
    """(task state, attempt_idx) lists of at most `size`, in order: a wave's
    requests are never all built at once."""
    piece: list[tuple[dict, int]] = []
    for st, more in wave:
        start = st["n"]
        for j in range(more):
            piece.append((st, start + j))
            if len(piece) == size:
                yield piece
                piece = []
    if piece:
        yield piece


def _initial_state(tasks: list[dict], cached: dict[str, list[dict]]) -> dict:
    """Per content hash: the task, counts, and the cached generations by attempt index."""
    state = {}
    for task in tasks:
        h = task["content_hash"]
        by_idx = {rec["attempt_idx"]: rec for rec in cached.get(h, ())}
        state[h] = {"task": task, "n": 0, "pass": 0, "asked": 0, "done": False, "cached": by_idx}
    return state


def _run_wave(
    wave: list[tuple[dict, int]],
    backend: Backend,
    judge: Backend | None,
    plan: SamplePlan,
    cache: CacheWriter | None,
    stats: SamplingStats,
    progress: SamplingProgress,
) -> Iterator[tuple[str, dict]]:
    """Generate and verify one wave; yield its attempts and count them into the task states."""
    requests = [request_for(st, idx, plan) for st, idx in wave]
    generated = _generate(backend, plan, wave, requests, cache, stats, progress)
    yield from record(
        [(st, req, gen, origin) for (st, _), req, (gen, origin) in zip(wave, requests, generated)], judge, plan, stats
    )


def record(
    finished: list[tuple[dict, GenRequest, GenResult, str | None]],
    judge: Backend | None,
    plan: SamplePlan,
    stats: SamplingStats,
) -> Iterator[tuple[str, dict]]:
    """Verify finished requests (task state, request, result, run it came
    from if not this one) in one call: sandboxes in parallel, one judge
    batch. Yield an attempt row for each real one and count it into its
    task's state; a request that got no completion is not an attempt and
    ends its task."""
    attempts = [finished[i] for i in real_attempts(finished, stats)]
    for item, verdict in zip(attempts, verify_finished(attempts, judge, plan)):
        yield ATTEMPT_TAG, attempt_row(item, verdict, plan)


def verify_finished(
    attempts: list[tuple[dict, GenRequest, GenResult, str | None]], judge: Backend | None, plan: SamplePlan
) -> list[dict]:
    """Verdicts for finished attempts, in order: one `verify_attempts` call
    (sandboxes in parallel, one judge batch)."""
    return verify_attempts(
        [(st["task"], gen.completion) for st, _, gen, _ in attempts],
        judge,
        plan.verify,
        [req.seed for _, req, _, _ in attempts],
    )


def default_judge(backend: Backend, judge: Backend | None) -> Backend | None:
    """The judge of rubric attempts: the one given, else the sampler if it can judge."""
    if judge is None and getattr(backend, "can_judge", True):
        return backend
    return judge


def real_attempts(finished: list[tuple[dict, GenRequest, GenResult, str | None]], stats: SamplingStats) -> list[int]:
    """Which finished requests are attempts (to verify); the others end
    their tasks here."""
    skip = (NOT_RECORDED, "error")  # "error": the server says the generation failed (as is_generation)
    real = [i for i, (_, _, gen, _) in enumerate(finished) if gen.finish_reason not in skip and gen.error is None]
    for i in set(range(len(finished))) - set(real):
        st, _, gen, _ = finished[i]
        st["exhausted"] = True  # replay: no more recorded attempts; else this request failed
        if gen.finish_reason != NOT_RECORDED:
            # Not an attempt: never verified, counted or cached. The task is
            # dropped (its decision would rest on fewer attempts than asked).
            st.setdefault("failed", gen.error or gen.finish_reason)
            stats.failed += 1
            stats.first_failure = stats.first_failure or (gen.error or gen.finish_reason)[:300]
    return real


def attempt_row(item: tuple[dict, GenRequest, GenResult, str | None], verdict: dict, plan: SamplePlan) -> dict:
    """The attempt's row, counted into its task's state."""
    st, req, gen, reused_from = item
    task = st["task"]
    verdict = dict(verdict)
    unmeasured = verdict.pop("unmeasured", None)
    attempt = {
        "run_id": plan.run_id,
        "content_hash": task["content_hash"],
        "model_id": plan.model_id,
        "sampler_key": plan.sampler_key,
        "attempt_idx": req.attempt_idx,
        "seed": req.seed,
        "completion": gen.completion,
        "prompt_tokens": gen.prompt_tokens,
        "completion_tokens": gen.completion_tokens,
        "finish_reason": gen.finish_reason,
        "gen_seconds": gen.gen_seconds,
        **verdict,
        "reused_from_run": reused_from or gen.origin,
    }
    if unmeasured:
        # The judge failed on it: no pass, no fail, not counted; the task is not measured (_result).
        st["exhausted"] = True
        st.setdefault("judge_failed", attempt["error"])
        return attempt
    st["n"] += 1
    st["pass"] += int(bool(attempt["passed"]))
    return attempt


def _generate(backend, plan, wave, requests, cache, stats, progress) -> list[tuple[GenResult, str | None]]:
    """(result, run that generated it if not this one) per request: cached
    generations first, one engine call for the rest. `progress` hears of
    each request as it comes back: from the backend's own count where it
    keeps one while the call runs (`reports_progress`, vLLM), else from
    each result it hands over."""
    out: list[tuple[GenResult, str | None] | None] = [None] * len(wave)
    todo = []
    for i, (st, _) in enumerate(wave):
        rec = cached_generation(st, requests[i])
        if rec is not None:
            out[i] = (_from_cache(rec), rec["run_id"])
            stats.reused += 1
            progress.reused(1)
        else:
            todo.append(i)
    if todo:
        batch = [requests[i] for i in todo]
        persisted: set[int] = set()
        told = CallProgress(progress, backend)

        def persist(j: int, res: GenResult) -> None:
            # Called as each generation finishes, so a run killed mid-wave
            # keeps every attempt it already paid for.
            res = checked(res)
            if cache is not None and is_generation(res):
                cache.write(cache_record(plan, batch[j], res))
                persisted.add(j)

        def on_result(j: int, res: GenResult) -> None:
            told.result(j)
            persist(j, res)

        t0 = time.perf_counter()
        try:
            results = backend.generate(batch, on_result=on_result, **told.kwargs())
        finally:
            stats.engine_seconds += time.perf_counter() - t0
            stats.engine_calls += 1
        results = [checked(r) for r in results]
        told.finish(len(results))
        for j, res in enumerate(results):
            if j not in persisted and res.origin is None:
                persist(j, res)  # a backend that reports only at the end
        if cache is not None:
            cache.sync()
        for i, res in zip(todo, results):
            out[i] = (res, None)
        stats.generated += sum(1 for r in results if is_generation(r))
    return out  # type: ignore[return-value]


# Why a task is not measured: (its state's key, drop reason, why).
_NO_COMPLETION = "a request to the model got no usable completion; nothing of it was verified or cached"
_NOT_MEASURED = (
    ("failed", "generation_failed", _NO_COMPLETION),
    ("judge_failed", "judge_failed", "the rubric judge failed on an attempt (server error, reply cut off or empty)"),
)


def _result(st: dict, plan: SamplePlan) -> dict:
    for key, reason, text in _NOT_MEASURED:
        if st.get(key):
            why = {"why": text, "error": st[key][:300], "attempts_before": st["n"]}
            return dict(drop_record(st["task"], STAGE, reason, why), run_id=plan.run_id, status="dropped")
    if st["n"] == 0:
        # Replay with no recorded attempt for this task: nothing to judge.
        why = {"why": "the replayed rollouts hold no attempt for this content_hash"}
        return dict(drop_record(st["task"], STAGE, "no_recorded_attempts", why), run_id=plan.run_id, status="dropped")
    stats = classify(st["pass"], st["n"], plan.band.min_pass_rate, plan.band.max_pass_rate)
    if "predicted" in st:
        stats["predicted_pass_rate"] = st["predicted"]  # before its first attempt (difficulty.py)
    if plan.mode == "bayes":
        stats["pass_rate_lo"], stats["pass_rate_hi"] = posterior_interval(plan.policy, st["pass"], st["n"])
    if stats["status"] in ("all_pass", "all_fail"):
        # Not dropped, but not kept either: the funnel counts it out here.
        stats.update(drop_stage="classify", drop_reason=stats["status"])
    return dict(st["task"], run_id=plan.run_id, **stats)


def write_stats(stats_dir: str, stats: SamplingStats) -> None:
    """One small JSON file per sampled group; `read_stats` adds them up.
    A file, not a Beam metric: not every runner reports metrics."""
    Path(stats_dir).mkdir(parents=True, exist_ok=True)
    tmp = Path(stats_dir) / f".{uuid.uuid4().hex}.tmp"
    tmp.write_text(json.dumps(asdict(stats)))
    os.replace(tmp, tmp.with_name(tmp.name[1:-4] + ".json"))


def read_stats(stats_dir: str) -> SamplingStats:
    total = SamplingStats()
    for f in Path(stats_dir).glob("*.json") if Path(stats_dir).is_dir() else ():
        for k, v in json.loads(f.read_text()).items():
            if isinstance(v, str):
                setattr(total, k, getattr(total, k) or v)  # the first one seen
            else:
                setattr(total, k, getattr(total, k) + v)
    return total
