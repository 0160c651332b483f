"""Stages `sample` and `verify`: attempts per task, in waves, until each
task's keep/drop decision is made (see sampling_policy), then `classify`.

Tasks arrive in batches; each wave of a batch is one engine call with every
undecided task's next attempts in it, so the engine always sees a large
batch. Each wave is verified as soon as it is generated (one
`verify_attempts` call: sandboxes in parallel, one judge batch), because the
next wave depends on the verdicts.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Callable, Iterator

import apache_beam as beam

from tasksieve.schemas.config import VerifyConfig
from tasksieve.transforms.backends import Backend, GenRequest
from tasksieve.transforms.classify import classify
from tasksieve.transforms.routing import split_tagged
from tasksieve.transforms.sampling_policy import attempt_seed, next_wave
from tasksieve.transforms.verifiers import VERIFIABLE, verify_attempts

# Tags of the pairs this stage emits (see transforms/routing.py).
ATTEMPT_TAG = "attempt"
RESULT_TAG = "result"
SAMPLE_TAG = "sample"
DROPPED_TAG = "dropped"
STAGE = "sample"


@dataclass(frozen=True)
class SamplePlan:
    """What the sampling stage needs to know, picklable for Beam workers."""

    run_id: str
    model_id: str
    sampler_key: str
    mode: str
    k: int
    waves: tuple
    seed: int
    system_prompt: str
    min_pass_rate: float
    max_pass_rate: float
    # ((domain, system prompt), ...); a domain not named uses system_prompt.
    system_prompts: tuple = ()
    verify: VerifyConfig = field(default_factory=VerifyConfig)

    @property
    def band_is_default(self) -> bool:
        return self.min_pass_rate <= 0.0 and self.max_pass_rate >= 1.0


def needs_no_sampling(task: dict) -> dict | None:
    """The task marked dropped if no verifier can judge its attempts."""
    if task["domain"] in VERIFIABLE:
        return None
    return dict(task, drop_stage=STAGE, drop_reason="no_verifier",
                drop_detail=json.dumps({"domain": task["domain"],
                                        "why": f"no {task['domain']} verifier is available; not sampled, nothing spent"}))


def messages_for(task: dict, plan: SamplePlan) -> tuple:
    system = dict(plan.system_prompts).get(task["domain"], plan.system_prompt)
    return (("system", system), ("user", task["prompt"]))


def sample_tasks(
    tasks: list[dict], backend: Backend, plan: SamplePlan, on_task_done: Callable[[int], None] | None = None,
    judge: Backend | None = None,
) -> Iterator[tuple[str, dict]]:
    """Yield ("attempt", row) for every attempt and ("result", row) for every
    task once decided. `judge` scores rubric attempts (default: `backend`).
    Beam-free: the unit tests drive it directly."""
    judge = backend if judge is None else judge
    state = {t["content_hash"]: {"task": t, "n": 0, "pass": 0, "done": False} for t in tasks}
    while True:
        wave: list[tuple[dict, int]] = []  # (task state, attempt_idx)
        for st in state.values():
            if st["done"]:
                continue
            more = next_wave(plan.mode, plan.k, list(plan.waves), st["n"], st["pass"], plan.band_is_default)
            if more == 0:
                st["done"] = True
                yield RESULT_TAG, _result(st, plan)
                if on_task_done:
                    on_task_done(1)
                continue
            wave.extend((st, st["n"] + j) for j in range(more))
        if not wave:
            return
        requests = [
            GenRequest(messages=messages_for(st["task"], plan), seed=attempt_seed(plan.seed, st["task"]["content_hash"], idx))
            for st, idx in wave
        ]
        generated = backend.generate(requests)
        # One call verifies the wave: sandboxes in parallel, one judge batch.
        verdicts = verify_attempts([(st["task"], gen.completion) for (st, _), gen in zip(wave, generated)],
                                   judge, plan.verify, [req.seed for req in requests])
        for (st, idx), req, gen, verdict in zip(wave, requests, generated, verdicts):
            task = st["task"]
            attempt = {
                "run_id": plan.run_id, "content_hash": task["content_hash"], "model_id": plan.model_id,
                "sampler_key": plan.sampler_key, "attempt_idx": idx, "seed": req.seed,
                "completion": gen.completion, "prompt_tokens": gen.prompt_tokens,
                "completion_tokens": gen.completion_tokens, "finish_reason": gen.finish_reason,
                "gen_seconds": gen.gen_seconds, **verdict,
            }
            if gen.error:
                attempt["error"] = gen.error
            st["n"] += 1
            st["pass"] += int(bool(attempt["passed"]))
            yield ATTEMPT_TAG, attempt


def _result(st: dict, plan: SamplePlan) -> dict:
    stats = classify(st["pass"], st["n"], plan.min_pass_rate, plan.max_pass_rate)
    if stats["status"] in ("all_pass", "all_fail"):
        # Not dropped, but not kept either: the funnel counts it out here.
        stats.update(drop_stage="classify", drop_reason=stats["status"])
    return dict(st["task"], run_id=plan.run_id, **stats)


class _Progress:
    """One progress bar per worker process for the sampling stage."""

    _bar = None
    _lock = threading.Lock()

    @classmethod
    def update(cls, total: int, n: int) -> None:
        from tqdm import tqdm

        with cls._lock:
            if cls._bar is None:
                cls._bar = tqdm(total=total, desc="sampling+verifying", unit="task", dynamic_ncols=True)
            cls._bar.update(n)
            if cls._bar.n >= cls._bar.total:
                cls._bar.close()
                cls._bar = None


class _SampleFn(beam.DoFn):
    def __init__(self, plan: SamplePlan, backend_factory: Callable[[], Backend],
                 judge_factory: Callable[[], Backend] | None = None):
        self.plan = plan
        self.backend_factory = backend_factory
        self.judge_factory = judge_factory

    def setup(self):
        # The factory returns the process-wide engine: loaded once per worker.
        self.backend = self.backend_factory()
        self.judge = self.judge_factory() if self.judge_factory else self.backend

    def process(self, group, total, tasks_per_batch):
        _Progress.update(total, 0)  # show the bar before the first (long) wave
        _, tasks = group
        tasks = sorted(tasks, key=lambda t: t["content_hash"])  # deterministic batches
        for i in range(0, len(tasks), tasks_per_batch):
            # ("attempt", row) and ("result", row) pairs, split downstream.
            yield from sample_tasks(tasks[i : i + tasks_per_batch], self.backend, self.plan,
                                    lambda n: _Progress.update(total, n), self.judge)


class SampleAndClassify(beam.PTransform):
    """Tasks in; (classified task results, attempts, tasks that cannot be
    sampled) out."""

    def __init__(self, plan: SamplePlan, backend_factory: Callable[[], Backend], tasks_per_batch: int, groups: int,
                 judge_factory: Callable[[], Backend] | None = None):
        super().__init__()
        self.plan = plan
        self.backend_factory = backend_factory
        self.judge_factory = judge_factory
        self.tasks_per_batch = tasks_per_batch
        self.groups = groups

    def expand(self, tasks):
        def route(task):
            dropped = needs_no_sampling(task)
            yield (SAMPLE_TAG, task) if dropped is None else (DROPPED_TAG, dropped)

        routed = split_tagged(tasks | "HasVerifier" >> beam.FlatMap(route), "HasVerifierSplit", (SAMPLE_TAG, DROPPED_TAG))
        to_sample = routed[SAMPLE_TAG]
        total = to_sample | "CountForProgress" >> beam.combiners.Count.Globally()
        groups = self.groups
        sampled = (
            to_sample
            # Tasks are spread over `groups` keyed groups (one per worker on a
            # cluster), and each group is cut into full batches: one engine
            # call per wave per batch. Not BatchElements: it emits its last
            # batch from finish_bundle, which Beam 2.77's DaskRunner drops.
            | "KeyByGroup" >> beam.Map(lambda t: (int(t["content_hash"][:8], 16) % groups, t))
            | "Group" >> beam.GroupByKey()
            | "SampleVerifyClassify" >> beam.ParDo(
                _SampleFn(self.plan, self.backend_factory, self.judge_factory), beam.pvalue.AsSingleton(total),
                self.tasks_per_batch)
        )
        out = split_tagged(sampled, "SampledSplit", (RESULT_TAG, ATTEMPT_TAG))
        return out[RESULT_TAG], out[ATTEMPT_TAG], routed[DROPPED_TAG]
