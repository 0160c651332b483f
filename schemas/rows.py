"""Typed row shapes, as hints only: the dicts the stages pass around.

The pyarrow schemas in records.py are the contract; these TypedDicts mirror
them field for field (tests/test_structure.py checks they never drift), so
an editor or type checker can follow a row through the stages. Every field
may be missing or None in flight (`total=False`): a row is validated by the
stage that needs a field, not by its type.
"""

from __future__ import annotations

from typing import Optional, TypedDict


class Task(TypedDict, total=False):
    """A delivered task after validation and hashing (records.TASK_SCHEMA)."""

    task_id: str
    source: str
    batch_id: Optional[str]
    domain: str
    prompt: str
    answer: Optional[str]
    tests: Optional[str]
    entry_point: Optional[str]
    reference_solution: Optional[str]
    rubric: Optional[list[str]]
    graded_attempts: Optional[str]
    expert_minutes: Optional[float]
    expert_cost_usd: Optional[float]
    license: Optional[str]
    created_at: Optional[str]
    meta: Optional[str]
    content_hash: str
    source_file: str
    line: int


class Result(Task, total=False):
    """A task's fate in one run (records.RESULT_SCHEMA): one row per input row."""

    run_id: str
    n_attempts: Optional[int]
    n_pass: Optional[int]
    pass_rate: Optional[float]
    pass_rate_lo: Optional[float]
    pass_rate_hi: Optional[float]
    difficulty: Optional[str]
    status: str  # learnable | all_pass | all_fail | dropped | quarantined (| kept, from dedup)
    drop_stage: Optional[str]
    drop_reason: Optional[str]
    drop_detail: Optional[str]  # JSON evidence (transforms/stage.py drop_record)
    raw: Optional[str]
    judge_agreement: Optional[str]  # rubric: measured | unmeasured (transforms/verify/judge/gate.py)
    judge_kappa: Optional[float]
    predicted_pass_rate: Optional[float]  # `predicted` sampling, before the first attempt
    template_group: Optional[str]  # same_problem.template.template_group; kept variants share the original's


class Attempt(TypedDict, total=False):
    """One sampled and verified attempt (records.ATTEMPT_SCHEMA)."""

    run_id: str
    content_hash: str
    model_id: str
    sampler_key: str
    attempt_idx: int
    seed: int
    completion: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str
    gen_seconds: float
    extracted_answer: Optional[str]
    passed: bool
    score: Optional[float]
    verifier: str
    verify_seconds: float
    error: Optional[str]  # the harness's own codes only (docs/verification.md)
    reused_from_run: Optional[str]
    judge_model_id: Optional[str]
    judge_prompt_tokens: Optional[int]
    judge_completion_tokens: Optional[int]
    judge_seconds: Optional[float]
