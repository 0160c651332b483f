"""Rewards for training on a tasksieve export, scored exactly as curation
scored: the same verifiers (math-verify rules, the sandboxed code harness,
the rubric judge) on the same task fields, read from each exported row's
`verifier` spec (JSON; `tasksieve export` writes it in every format).

One entry point per trainer, each with the signature that trainer calls:

- verl: `compute_score(data_source, solution_str, ground_truth, extra_info)`
  (custom_reward_function.path = this file, name = compute_score);
- TRL GRPOTrainer: `trl_reward(completions, verifier, **kwargs)` (pass it in
  reward_funcs; the `verifier` column reaches it as a keyword argument);
- OpenRLHF: `reward_func(queries, prompts, labels)` (--remote_rm_url this
  file, --label_key label).

Rubric tasks need a judge: `configure(judge=backend)` with any tasksieve
Backend (an OpenAI-compatible server through
tasksieve.transforms.backends.openai, or a vLLM engine); without one a
rubric attempt scores 0 and says so in its verdict. `configure(settings=...)`
takes the run's `[verify]` section so limits and thresholds match the run.
"""

from __future__ import annotations

import json
from typing import Any

from tasksieve.schemas.config import VerifyConfig
from tasksieve.transforms.verify.verifiers import verify_attempts

_STATE: dict[str, Any] = {"settings": None, "judge": None}


def configure(*, settings: VerifyConfig | None = None, judge=None) -> None:
    """The [verify] settings and the rubric judge every reward below uses."""
    _STATE["settings"], _STATE["judge"] = settings, judge


def task_of(spec: str | dict) -> dict:
    """The task fields a verifier reads, from a `verifier` spec."""
    task = json.loads(spec) if isinstance(spec, str) else dict(spec)
    if not isinstance(task, dict) or task.get("domain") not in ("math", "exact", "code", "rubric"):
        raise ValueError("not a tasksieve verifier spec (no known domain)")
    return task


def verdicts(specs: list, completions: list[str], seeds: list[int | None] | None = None) -> list[dict]:
    """Verdicts (passed, score, error, ...) in order; rubric attempts are
    judged in one batch. `seeds` are the attempts' sampling seeds, which
    curation also fed the judge (only a judge that samples cares)."""
    tasks = [task_of(s) for s in specs]
    # The function the sampling stage verifies a wave with: the same split
    # (rubric to the judge in one batch, the rest in parallel), the same verdicts.
    return verify_attempts(list(zip(tasks, completions)), _STATE["judge"], _STATE["settings"] or VerifyConfig(), seeds)


def _reward(v: dict) -> float:
    # Curation counted an attempt as passed or not; the reward is that bit.
    return 1.0 if v["passed"] else 0.0


def _text(completion) -> str:
    """A completion as text: a string, or a chat message list (TRL's
    conversational form: the last message's content)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return str(completion.get("content") or "")
    if isinstance(completion, (list, tuple)) and completion:
        return _text(completion[-1])
    return ""


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> float:
    """verl's custom reward function."""
    spec = (extra_info or {}).get("verifier")
    if not spec:
        raise ValueError("extra_info has no 'verifier' spec: export the set with `tasksieve export --format verl`")
    return _reward(verdicts([spec], [solution_str])[0])


def trl_reward(completions, verifier, **kwargs) -> list[float]:
    """TRL GRPOTrainer reward function: one float per completion."""
    return [_reward(v) for v in verdicts(list(verifier), [_text(c) for c in completions])]


def reward_func(queries, prompts, labels, **kwargs):
    """OpenRLHF's remote reward function: a query is the prompt followed by
    the response; the label is the verifier spec."""
    responses = [q[len(p) :] if q.startswith(p) else q for q, p in zip(queries, prompts)]
    rewards = [_reward(v) for v in verdicts(list(labels), responses)]
    try:
        import torch

        tensor = torch.tensor(rewards, dtype=torch.float32)
        return {"rewards": tensor, "scores": tensor, "extra_logs": {}}
    except ImportError:
        return {"rewards": rewards, "scores": rewards, "extra_logs": {}}
