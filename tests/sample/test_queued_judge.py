"""The rubric judge under the `queue` schedule: where the judge is the
sampling engine itself (the default), its requests join the engine's
queue beside the attempts instead of a blocking `generate` call
(transforms/sample/verify_behind.py), and every verdict and decision is
the wave schedule's."""

import random

import pytest

from test_queued import Coin, _by_key, _CoinQueue, _plan, _queued, _tasks, _waves
from tasksieve.transforms.backends.base import GenResult
from tasksieve.transforms.sample.attempt_bar import SamplingProgress


class SelfJudging(Coin):
    """A model that is its own rubric judge (the default: the sampler
    judges): an attempt meets a rubric task's criteria when its seed says
    so, and the judge's answer is the oracle's ratings of the fenced
    response. Its queue takes the judge's requests (`takes_judge`)."""

    model_id = "self-judging@test"

    def __init__(self, order_seed: int = 0):
        super().__init__({}, order_seed)
        self.generate_calls = 0
        self.judge_submits = []  # the size of each submit the queue got for the judge

    def answer(self, r) -> GenResult:
        from fake_judge import OracleJudge, _result, base_prompt, good_response

        user = dict(r.messages)["user"]
        if "BEGIN RESPONSE" in user:
            self.sent.append(("judge", r.seed))
            return _result(OracleJudge().rate(user))
        if base_prompt(user) is None:
            return super().answer(r)  # a math task
        self.sent.append((r.content_hash, r.attempt_idx, r.seed))
        good = random.Random(r.seed).random() < 0.4
        return _result(good_response(user) if good else "I think the sky is nice and I like it.")

    def generate(self, requests, on_result=None):
        self.generate_calls += 1
        return super().generate(requests, on_result)

    def open_queue(self, progress, limit):
        return _JudgingQueue(self, progress)


class _JudgingQueue(_CoinQueue):
    """The fake engine's queue, taking the judge's requests (uncounted by
    the bar) as VllmQueue does."""

    takes_judge = True

    def submit(self, requests, counted=True):
        if not counted:
            self.coin.judge_submits.append(len(requests))
        return super().submit(requests, counted)


def _rubric_tasks(n):
    from fake_judge import rubric_task

    return [dict(rubric_task(i, labelled=False), content_hash=f"r{i}") for i in range(n)]


@pytest.mark.parametrize("order_seed", [0, 3])
def test_the_judge_shares_the_queue_and_gives_the_waves_verdicts(order_seed):
    tasks = _rubric_tasks(12) + _tasks(8, seed=order_seed)[0]
    plan = _plan("sequential", 8, 5)

    class Count(SamplingProgress):
        gen = 0

        def generated(self, n):
            self.gen += n

    waves, queued, progress = SelfJudging(), SelfJudging(order_seed), Count()
    waves.rates = queued.rates = {t["content_hash"]: 0.5 for t in tasks}
    a_w, r_w = _by_key(_waves(tasks, waves, plan))
    a_q, r_q = _by_key(_queued(tasks, queued, plan, progress=progress))
    rubric = {k: a for k, a in a_q.items() if k[0].startswith("r")}
    assert rubric and {a["passed"] for a in rubric.values()} == {True, False}  # the judge rated both ways
    assert all(a["judge_model_id"] == "self-judging@test" for a in rubric.values())
    assert a_q == a_w and r_q == r_w  # every verdict, every decision
    assert sorted(queued.sent) == sorted(waves.sent)  # the same judge requests too, nothing extra
    # Through the queue, never a blocking `generate`; not counted as attempts.
    assert queued.generate_calls == 0 and sum(queued.judge_submits) == len(rubric)
    assert progress.gen == len(a_q)


def test_the_engine_is_topped_up_while_the_judge_answers():
    tasks = _rubric_tasks(10)
    backend = SelfJudging(order_seed=2)
    backend.rates = {}
    events = []
    queue_of = backend.open_queue

    def open_queue(progress, limit):
        queue = queue_of(progress, limit)
        submit = queue.submit

        def watched(requests, counted=True):
            events.append(("judge" if not counted else "attempts", len(queue.held)))
            return submit(requests, counted)

        queue.submit = watched
        return queue

    backend.open_queue = open_queue
    _queued(tasks, backend, _plan("sequential", 8, 10))
    first_judge = next(i for i, (kind, _) in enumerate(events) if kind == "judge")
    # Attempts were asked for after the first judge request went in, while
    # requests were still held: the judge did not stop the top-ups.
    assert any(kind == "attempts" and held > 0 for kind, held in events[first_judge + 1 :])


def test_a_judge_that_is_not_the_engine_is_called_as_before():
    from fake_judge import OracleJudge

    tasks = _rubric_tasks(6)
    plan = _plan("sequential", 8, 6)
    sampler, judge = SelfJudging(order_seed=1), OracleJudge()
    a_q, _ = _by_key(_queued(tasks, sampler, plan, judge=judge))
    assert sampler.judge_submits == [] and len(judge.prompts) == len(a_q)
    assert all(a["judge_model_id"] == OracleJudge.model_id for a in a_q.values())
