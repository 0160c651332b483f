"""The `queue` schedule (transforms/sample/queued.py): the engine is topped
up as each task's attempts come back, and the attempts, verdicts and
decisions are exactly the wave schedule's, whatever order the engine
finishes requests in. Faults, the cache and the window hold as under waves."""

import json
import random
import threading
from concurrent.futures import Future

import pytest

from fakes import arithmetic_tasks, sample_plan
from tasksieve.schemas.config import SamplingConfig
from tasksieve.transforms.backends.base import REQUEST_FAILED, GenResult
from tasksieve.transforms.sample import verify_behind
from tasksieve.transforms.sample.attempt_bar import SamplingProgress
from tasksieve.transforms.sample.prior_history import OnlinePredictor
from tasksieve.transforms.sample.queued import sample_queued
from tasksieve.transforms.sample.stage import SamplePlan, SamplingStats, sample_tasks


class Coin:
    """A model whose attempt is right with its task's own probability, drawn
    from the attempt's seed: the outcome belongs to the request, not to the
    batch it was sent in. Tasks "Calculate a + b." of pass rates 0, 1 and in
    between. Its queue (`open_queue`) finishes what it holds in a random
    order, a few at a time, like an engine whose completions differ in
    length; `fail` names (task, attempt) pairs that get no completion."""

    model_id = "coin@test"
    on_step = None  # called at each wait that need not block

    def __init__(self, rates: dict[str, float], order_seed: int = 0, fail=(), queue=True):
        self.rates, self.rng, self.fail = rates, random.Random(order_seed), set(fail)
        self.sent = []  # every request the engine got, in order
        self.log = []  # ("submit", hash, idx) / ("finish", hash, idx)
        if not queue:
            self.open_queue = None

    def answer(self, r) -> GenResult:
        self.sent.append((r.content_hash, r.attempt_idx, r.seed))
        if (r.content_hash, r.attempt_idx) in self.fail:
            return GenResult("", 0, 0, REQUEST_FAILED, 0.0, error="HTTP 400: too long")
        prompt = dict(r.messages)["user"]
        value = eval(prompt[10:-1])  # test data only
        right = random.Random(r.seed).random() < self.rates[r.content_hash]
        return GenResult(f"\\boxed{{{value if right else value + 1}}}", 12, 5, "stop", 0.01)

    def generate(self, requests, on_result=None):
        out = [self.answer(r) for r in requests]
        for i, res in enumerate(out):
            if on_result:
                on_result(i, res)
        return out

    def open_queue(self, progress, limit):
        return _CoinQueue(self, progress)


class _CoinQueue:
    def __init__(self, coin, progress):
        self.coin, self.progress, self.held, self.next, self.closed = coin, progress, [], 0, False
        self.polls = 0  # waits that need not block (verification runs beside them)
        self.quiet = set()  # tickets the bar does not hear of (a judge's, as in VllmQueue)

    def submit(self, requests, counted=True):
        tickets = list(range(self.next, self.next + len(requests)))
        self.next += len(requests)
        self.held += zip(tickets, requests)
        if not counted:
            self.quiet.update(tickets)
        self.coin.log += [("submit", r.content_hash, r.attempt_idx) for r in requests]
        return tickets

    @property
    def in_flight(self):
        return len(self.held)

    def wait(self, on_result, block=True):
        # Finishes one to three at a time; a step that need not block may finish none.
        self.polls += not block
        if not block and self.coin.on_step:
            self.coin.on_step()
        self.coin.rng.shuffle(self.held)
        n = self.coin.rng.randint(1 if block else 0, 3)
        done, self.held = self.held[:n], self.held[n:]
        out = []
        for ticket, req in done:
            res = self.coin.answer(req)
            self.coin.log.append(("finish", req.content_hash, req.attempt_idx))
            on_result(ticket, res)
            if ticket not in self.quiet:
                self.progress.generated(1)
            out.append((ticket, res))
        return out

    def close(self):
        self.closed = True


def _tasks(n: int, seed: int = 0):
    rng = random.Random(seed)
    tasks = arithmetic_tasks(*(f"Calculate {i} + {i + 1}." for i in range(n)))
    rates = {t["content_hash"]: rng.choice([0.0, 1.0, 1.0, 0.97, 0.5, 0.2, 0.05]) for t in tasks}
    return tasks, rates


def _plan(mode: str, k: int, per_batch: int, waves=(2, 2, 4)) -> SamplePlan:
    base = sample_plan(mode, k, waves)
    sampling = SamplingConfig(
        mode=mode, k=k, waves=list(waves), seed=0, system_prompt="sys", tasks_per_batch=per_batch, schedule="waves"
    )
    return SamplePlan(run_id=base.run_id, model_id=base.model_id, sampler_key=base.sampler_key, sampling=sampling)


def _new_predictor(plan):
    s = plan.sampling
    return OnlinePredictor(s.k, s.predicted.keep_signal, s.bayes.prior_a, s.bayes.prior_b)


def _waves(tasks, backend, plan, **kw):
    """What transform.py does under `waves`: one sample_tasks per batch."""
    predictor = _new_predictor(plan) if plan.mode == "predicted" else None
    n = plan.sampling.tasks_per_batch
    out = []
    for i in range(0, len(tasks), n):
        out += sample_tasks(tasks[i : i + n], backend, plan, predictor=predictor, **kw)
    return out


def _queued(tasks, backend, plan, **kw):
    predictor = _new_predictor(plan) if plan.mode == "predicted" else None
    return list(sample_queued(tasks, backend, plan, predictor=predictor, **kw))


def _by_key(pairs):
    """Attempts by (task, index) and results by task; an attempt without its
    verification time (a clock reading, not a decision)."""
    attempts = {
        (r["content_hash"], r["attempt_idx"]): {f: v for f, v in r.items() if f != "verify_seconds"}
        for tag, r in pairs
        if tag == "attempt"
    }
    results = {r["content_hash"]: r for tag, r in pairs if tag == "result"}
    return attempts, results


@pytest.mark.parametrize(
    "mode,k,per_batch",
    [
        ("sequential", 8, 7),
        ("sequential", 16, 128),
        ("fixed", 8, 5),
        ("bayes", 16, 9),
        ("predicted", 8, 10),
        ("predicted", 16, 6),
    ],
)
@pytest.mark.parametrize("order_seed", [0, 1])
def test_the_queue_makes_the_waves_attempts_and_decisions(mode, k, per_batch, order_seed):
    tasks, rates = _tasks(40, seed=order_seed)
    plan = _plan(mode, k, per_batch)
    waves, queued = Coin(rates), Coin(rates, order_seed=order_seed)
    a_w, r_w = _by_key(_waves(tasks, waves, plan))
    a_q, r_q = _by_key(_queued(tasks, queued, plan))
    assert a_q == a_w  # every attempt: index, seed, completion, verdict
    assert r_q == r_w  # every task's result row: status, counts, predictions
    assert len(r_q) == len(tasks)
    assert sorted(queued.sent) == sorted(waves.sent)  # nothing asked twice, nothing extra
    assert {"all_pass", "all_fail", "learnable"} <= {r["status"] for r in r_q.values()}  # all three outcomes seen


class _InlinePool:
    """An executor that runs what it is given at once: verification as fast
    as this fake engine, so the order of events is the scheduler's alone."""

    def __init__(self, *a, **kw):
        pass

    def submit(self, fn, *args):
        f = Future()
        f.set_result(fn(*args))
        return f

    def shutdown(self, **kw):
        pass


def test_the_engine_is_topped_up_before_a_wave_is_back(monkeypatch):
    """A task that has both its first attempts back asks for its next ones
    while other tasks' first attempts are still out: no wave barrier."""
    monkeypatch.setattr(verify_behind, "ThreadPoolExecutor", _InlinePool)
    tasks, rates = _tasks(30)
    rates = {h: 1.0 for h in rates}  # every task needs a second wave
    coin = Coin(rates, order_seed=3)
    _queued(tasks, coin, _plan("sequential", 8, 128))
    first_wave_done = max(i for i, (what, _, idx) in enumerate(coin.log) if what == "finish" and idx < 2)
    second_wave_sent = min(i for i, (what, _, idx) in enumerate(coin.log) if what == "submit" and idx >= 2)
    assert second_wave_sent < first_wave_done


def test_the_engine_is_stepped_while_attempts_are_verified(monkeypatch):
    """Verification does not stop the engine: the first attempt's verdict
    can only come once the scheduler has stepped the engine again (a
    scheduler that waited on its verdicts first would make it time out)."""
    stepped, first = threading.Event(), []
    real = verify_behind.verify_one

    def verify_after_a_step(task, completion, settings):
        if not first:
            first.append(stepped.wait(10))
        return real(task, completion, settings)

    monkeypatch.setattr(verify_behind, "verify_one", verify_after_a_step)
    tasks, rates = _tasks(20)
    coin = Coin(rates, order_seed=2)
    coin.on_step = stepped.set
    a_q, r_q = _by_key(_queued(tasks, coin, _plan("sequential", 8, 128)))
    assert first and all(first)  # two threads may both have been first: each saw a step
    a_w, r_w = _by_key(_waves(tasks, Coin(rates), _plan("sequential", 8, 128)))
    assert (a_q, r_q) == (a_w, r_w)


def test_an_engine_on_the_cpu_gets_its_attempts_verified_as_they_come_back(monkeypatch):
    """`shares_cpu`: no verification threads beside the engine; the same
    attempts and decisions."""
    monkeypatch.setattr(verify_behind, "ThreadPoolExecutor", _no_threads)
    tasks, rates = _tasks(30)
    coin = Coin(rates, order_seed=4)
    coin.shares_cpu = True
    a_q, r_q = _by_key(_queued(tasks, coin, _plan("bayes", 8, 7)))
    a_w, r_w = _by_key(_waves(tasks, Coin(rates), _plan("bayes", 8, 7)))
    assert (a_q, r_q) == (a_w, r_w)


def _no_threads(*a, **kw):
    raise AssertionError("verification threads beside an engine on the CPU")


def test_at_most_window_tasks_are_open_and_new_ones_come_in_as_others_finish():
    tasks, rates = _tasks(50)
    coin = Coin(rates, order_seed=5)
    _queued(tasks, coin, _plan("sequential", 8, 4))
    open_, most, let_in = {}, 0, []
    for what, h, _ in coin.log:
        open_[h] = open_.get(h, 0) + (1 if what == "submit" else -1)
        if what == "submit" and h not in let_in:
            let_in.append(h)
        most = max(most, sum(1 for v in open_.values() if v > 0))
    assert most <= 4
    assert let_in == [t["content_hash"] for t in tasks if let_in.count(t["content_hash"])]  # in task order
    assert len(let_in) == 50


def test_a_failed_request_ends_its_task_as_under_waves_and_counts_add_up():
    tasks, rates = _tasks(12)
    fail = {("h3", 0), ("h7", 1)}
    plan = _plan("sequential", 8, 5)
    s_w, s_q = SamplingStats(), SamplingStats()
    a_w, r_w = _by_key(_waves(tasks, Coin(rates, fail=fail), plan, stats=s_w))
    a_q, r_q = _by_key(_queued(tasks, Coin(rates, order_seed=2, fail=fail), plan, stats=s_q))
    assert a_q == a_w and r_q == r_w
    assert r_q["h3"]["drop_reason"] == "generation_failed" and r_q["h7"]["drop_reason"] == "generation_failed"
    assert ("h3", 0) not in a_q and ("h7", 1) not in a_q
    assert s_q.failed == s_w.failed == 2
    assert s_q.generated == s_w.generated == len(a_q)


class _Cache:
    def __init__(self):
        self.records, self.syncs = [], 0

    def write(self, rec):
        json.dumps(rec)
        self.records.append(rec)

    def sync(self):
        self.syncs += 1


def test_cached_generations_are_reused_not_sent_and_new_ones_are_cached():
    tasks, rates = _tasks(20)
    plan = _plan("sequential", 8, 6)
    first = _Cache()
    _queued(tasks, Coin(rates), plan, cache=first)
    # A second run with half of the tasks' generations in the cache.
    cached = {}
    for rec in first.records:
        if int(rec["content_hash"][1:]) % 2 == 0:
            cached.setdefault(rec["content_hash"], []).append(dict(rec, run_id="earlier"))
    coin, second, stats = Coin(rates, order_seed=4), _Cache(), SamplingStats()
    a_q, r_q = _by_key(_queued(tasks, coin, plan, cache=second, cached=cached, stats=stats))
    a_w, r_w = _by_key(_waves(tasks, Coin(rates), plan, cached=cached))
    assert a_q == a_w and r_q == r_w
    assert not any(int(h[1:]) % 2 == 0 for h, _, _ in coin.sent)  # nothing cached went to the engine
    assert stats.reused == sum(len(v) for v in cached.values())
    assert {(r["content_hash"], r["attempt_idx"]) for r in second.records} == {(h, i) for h, i, _ in coin.sent}
    assert all(a["reused_from_run"] == "earlier" for (h, _), a in a_q.items() if int(h[1:]) % 2 == 0)


def test_a_run_stopped_mid_queue_keeps_what_finished_and_gives_up_the_rest():
    tasks, rates = _tasks(20)

    class Stops(Coin):
        def open_queue(self, progress, limit):
            q = _CoinQueue(self, progress)
            real_wait, calls = q.wait, []

            def wait(on_result, block=True):
                calls.append(1)
                if len(calls) == 6:
                    raise RuntimeError("engine died")
                return real_wait(on_result, block)

            q.wait = wait
            self.queue = q
            return q

    coin, cache = Stops(rates), _Cache()
    with pytest.raises(RuntimeError, match="engine died"):
        _queued(tasks, coin, _plan("sequential", 8, 8), cache=cache)
    finished = [(h, i) for what, h, i in coin.log if what == "finish"]
    assert finished and sorted((r["content_hash"], r["attempt_idx"]) for r in cache.records) == sorted(finished)
    assert coin.queue.closed and cache.syncs >= 1


def test_a_backend_without_a_queue_gets_whole_batches_and_the_same_attempts():
    """Through WaveQueue; this backend tells of no result before its call
    returns, and every generation is still cached."""
    tasks, rates = _tasks(25)
    plan = _plan("bayes", 8, 6)
    calls = []

    class Plain(Coin):
        def generate(self, requests, on_result=None):
            calls.append(len(requests))
            return super().generate(requests)  # no on_result

    cache = _Cache()
    a_q, r_q = _by_key(_queued(tasks, Plain(rates, queue=False), plan, cache=cache))
    a_w, r_w = _by_key(_waves(tasks, Coin(rates), plan))
    assert a_q == a_w and r_q == r_w
    assert sum(calls) == len(a_q) and len(calls) < len(a_q)  # batched, not one by one
    assert sorted((r["content_hash"], r["attempt_idx"]) for r in cache.records) == sorted(a_q)


def test_a_backend_without_a_queue_gets_at_most_the_cap_per_call(monkeypatch):
    from tasksieve.transforms.sample import stage

    tasks, rates = _tasks(12)
    plan = _plan("sequential", 8, 12)
    calls = []

    class Plain(Coin):
        def generate(self, requests, on_result=None):
            calls.append(len(requests))
            return super().generate(requests, on_result)

    monkeypatch.setattr(stage, "MAX_WAVE_REQUESTS", 5)
    a_q, r_q = _by_key(_queued(tasks, Plain(rates, queue=False), plan))
    monkeypatch.undo()
    a_w, r_w = _by_key(_waves(tasks, Coin(rates), plan))
    assert a_q == a_w and r_q == r_w
    assert max(calls) == 5 and sum(calls) == len(a_q)


def test_progress_hears_every_attempt_and_every_task_once():
    tasks, rates = _tasks(15)

    class Count(SamplingProgress):
        def __init__(self):
            self.gen, self.tasks, self.asked = 0, 0, 0

        def generated(self, n):
            self.gen += n

        def decided(self, asked):
            self.tasks += 1
            self.asked += asked

    progress = Count()
    attempts, _ = _by_key(_queued(tasks, Coin(rates, order_seed=6), _plan("sequential", 8, 4), progress=progress))
    assert progress.gen == progress.asked == len(attempts) and progress.tasks == 15


def test_the_default_schedule_is_the_queue_and_not_part_of_the_cache_key():
    assert SamplingConfig().schedule == "queue"
    # The same attempts either way: a cached attempt is re-used across schedules.
    assert SamplingConfig(schedule="waves").sampler_key() == SamplingConfig().sampler_key()
