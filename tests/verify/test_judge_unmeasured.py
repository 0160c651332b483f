"""A judge that fails (server error, reply cut off or empty, an exception) or a
sampler reply the server marks as failed (finish_reason "error") is neither a
pass nor a fail: it is never counted into a task's pass rate; the task is not
measured (dropped: judge_failed / generation_failed)."""

import pytest

from tasksieve.schemas.config import BandConfig, SamplingConfig
from tasksieve.transforms.backends.base import REQUEST_FAILED, GenResult
from tasksieve.transforms.sample.stage import SamplePlan, sample_tasks
from tests.fake_judge import OracleJudge, good_response, rubric_task
from tests.fakes import arithmetic_tasks


def _plan(k=4):
    return SamplePlan(
        run_id="r",
        model_id="m@1",
        sampler_key="sk",
        sampling=SamplingConfig(mode="fixed", k=k, seed=0, system_prompt="sys"),
        band=BandConfig(min_pass_rate=0.0, max_pass_rate=1.0),
    )


class _GoodSampler:
    model_id = "s@test"
    can_judge = False

    def generate(self, requests, on_result=None):
        return [GenResult(good_response(dict(r.messages)["user"]), 20, 10, "stop", 0.01) for r in requests]


class _BrokenJudge(OracleJudge):
    def __init__(self, how):
        super().__init__()
        self.how = how

    def generate(self, requests, on_result=None):
        if self.how == "raise":
            raise ValueError("prompt longer than the maximum model length")
        good = super().generate(requests)
        if self.how == "request_failed":
            return [GenResult("", 0, 0, REQUEST_FAILED, 0.0, error="HTTP 400: context length") for _ in good]
        if self.how == "length":
            return [GenResult(g.completion.split("\n")[0], 9, 9, "length", 0.0) for g in good]
        if self.how == "length_after_rating":  # every criterion rated, then cut off while rambling
            return [GenResult(g.completion + "\nAlso,", 9, 9, "length", 0.0) for g in good]
        if self.how == "empty":
            return [GenResult("", 9, 0, "stop", 0.0) for _ in good]
        return good


@pytest.mark.parametrize("how", ["request_failed", "length", "empty", "raise"])
def test_a_failed_judge_is_not_a_failed_attempt(how):
    task = dict(rubric_task(0, labelled=False), content_hash="h0")
    rows = list(sample_tasks([task], _GoodSampler(), _plan(), judge=_BrokenJudge(how)))
    result = [r for t, r in rows if t == "result"][0]
    assert result["status"] == "dropped" and result["drop_reason"] == "judge_failed", result
    assert result.get("n_attempts") is None and result.get("pass_rate") is None


@pytest.mark.parametrize("how", ["ok", "length_after_rating"])
def test_a_working_judge_still_measures(how):
    task = dict(rubric_task(0, labelled=False), content_hash="h0")
    rows = list(sample_tasks([task], _GoodSampler(), _plan(), judge=_BrokenJudge(how)))
    result = [r for t, r in rows if t == "result"][0]
    assert (result["status"], result["n_attempts"], result["n_pass"]) == ("all_pass", 4, 4)


def test_an_unjudged_attempt_has_no_verdict_in_the_attempts_table():
    """Its row stays (its generation and judge cost are real), with passed and
    score null: avg(passed::int) over attempts.parquet leaves it out."""
    task = dict(rubric_task(0, labelled=False), content_hash="h0")
    rows = list(sample_tasks([task], _GoodSampler(), _plan(), judge=_BrokenJudge("request_failed")))
    attempts = [r for t, r in rows if t == "attempt"]
    assert attempts and all(a["passed"] is None and a["score"] is None for a in attempts)
    assert all(a["error"].startswith("judge failed") and "unmeasured" not in a for a in attempts)


class _ErrorFinishSampler:
    """Every other request's upstream died mid-generation: finish_reason "error"."""

    model_id = "s@test"

    def generate(self, requests, on_result=None):
        return [
            GenResult("The answer is \\boxed{", 20, 3, "error", 0.01)
            if r.attempt_idx % 2
            else GenResult("The answer is \\boxed{8}", 20, 9, "stop", 0.01)
            for r in requests
        ]


def test_a_generation_the_server_marks_failed_is_not_an_attempt():
    rows = list(sample_tasks(arithmetic_tasks("Calculate 5 + 3."), _ErrorFinishSampler(), _plan(), judge=None))
    assert not [r for t, r in rows if t == "attempt" and r["finish_reason"] == "error"]
    result = [r for t, r in rows if t == "result"][0]
    assert result["status"] == "dropped" and result["drop_reason"] == "generation_failed", result
