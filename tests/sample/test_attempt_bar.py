"""The sampling bar counts attempts as they come back (issue 47): its total
is a ceiling that only shrinks as adaptive policies decide tasks early and
ends at the attempts really made; every request is counted once whatever
the backend reports; cache re-use is not engine time."""

import pytest

from fakes import ScriptedBackend, arithmetic_tasks, sample_plan
from tasksieve.transforms.sample.attempt_bar import AttemptBar, CallProgress, SamplingProgress
from tasksieve.transforms.sample.stage import sample_tasks


def _plan(mode="sequential", k=8, waves=(2, 2, 4)):
    return sample_plan(mode, k, waves)


_tasks = arithmetic_tasks


# '+' always right (all pass: all k), '*' always wrong (all fail: all k),
# '-' right on even seeds (learnable: stops early under sequential).
PROMPTS = [f"Calculate {a} {op} {b}." for a, b in [(3, 4), (9, 2), (7, 5)] for op in "+*-"]


class _Recorder(SamplingProgress):
    """An AttemptBar's (n, total) after every report."""

    def __init__(self, bar):
        self.bar, self.states = bar, []

    def _keep(self):
        if not self.bar.closed:
            self.states.append((self.bar.bar.n, self.bar.bar.total))

    def generated(self, n):
        self.bar.generated(n)
        self._keep()

    def reused(self, n):
        self.bar.reused(n)
        self._keep()

    def decided(self, asked):
        self._keep()
        self.bar.decided(asked)
        self._keep()


class _Live(ScriptedBackend):
    """Counts its requests while the call runs, one by one, then hands the results over."""

    reports_progress = True

    def __init__(self):
        super().__init__()
        self.told = []

    def generate(self, requests, on_result=None, on_progress=None):
        for _ in requests:
            on_progress(1)
            self.told.append("progress")
        out = super().generate(requests)
        for i, r in enumerate(out):
            on_result(i, r)
            self.told.append("result")
        return out


class _AtTheEnd(ScriptedBackend):
    """Reports nothing while it runs (on_result never called)."""

    def generate(self, requests, on_result=None):
        return super().generate(requests)


class _PerResult(ScriptedBackend):
    """Hands each result over as it finishes, some twice (a retried report)."""

    def generate(self, requests, on_result=None):
        out = super().generate(requests)
        for i, r in enumerate(out):
            on_result(i, r)
            if i % 2 == 0:
                on_result(i, r)
        return out


@pytest.mark.parametrize("backend_cls", [_Live, _AtTheEnd, _PerResult])
@pytest.mark.parametrize("mode", ["sequential", "fixed", "bayes"])
def test_the_bar_ends_at_the_attempts_made_and_its_total_only_shrinks(backend_cls, mode):
    tasks = _tasks(*PROMPTS)
    bar = AttemptBar(len(tasks), 8)
    rec = _Recorder(bar)
    out = list(sample_tasks(tasks, backend_cls(), _plan(mode=mode), rec))
    attempts = sum(1 for kind, _ in out if kind == "attempt")
    assert bar.closed and bar.done_tasks == len(tasks)
    n_final, total_final = rec.states[-1]
    assert n_final == total_final == attempts  # every request counted once, and the ceiling met the truth
    totals = [t for _, t in rec.states]
    assert totals[0] == 8 * len(tasks) and all(b <= a for a, b in zip(totals, totals[1:]))
    assert all(n <= t for n, t in rec.states)
    if mode == "fixed":
        assert set(totals) == {8 * len(tasks)}  # exact from the start: its ETA is the real one
    else:
        assert attempts < 8 * len(tasks)  # the learnable '-' tasks stopped early, and the bar knew


def test_a_live_backend_is_counted_while_the_call_runs_and_not_again_from_its_results():
    backend = _Live()
    bar = AttemptBar(3, 4)
    out = list(sample_tasks(_tasks(*PROMPTS[:3]), backend, _plan(mode="fixed", k=4, waves=(4,)), bar))
    assert backend.told.index("result") == 12  # all 12 counted before the first result came back
    assert sum(1 for kind, _ in out if kind == "attempt") == 12
    assert bar.closed


def test_call_progress_tops_up_what_a_live_backend_left_untold():
    got = []

    class P(SamplingProgress):
        def generated(self, n):
            got.append(n)

    class Live:
        reports_progress = True

    told = CallProgress(P(), Live())
    told.kwargs()["on_progress"](2)
    told.result(0)  # a live backend's results are not counted again
    told.finish(5)
    assert got == [2, 3]
    plain = CallProgress(P(), object())
    assert plain.kwargs() == {}
    got.clear()
    plain.result(0)
    plain.result(0)
    plain.result(1)
    plain.finish(4)
    assert got == [1, 1, 2]


def test_cached_attempts_count_as_done_but_not_towards_the_rate():
    tasks = _tasks("Calculate 3 + 4.")
    h = tasks[0]["content_hash"]
    plan = _plan(mode="fixed", k=4, waves=(4,))
    from tasksieve.transforms.sample.policy import attempt_seed

    cached = {
        h: [
            {
                "run_id": "old",
                "attempt_idx": i,
                "seed": attempt_seed(0, h, i),
                "completion": "\\boxed{7}",
                "prompt_tokens": 5,
                "completion_tokens": 3,
                "finish_reason": "stop",
                "gen_seconds": 0.1,
            }
            for i in range(2)
        ]
    }
    bar = AttemptBar(1, 4)
    states = []

    class Watch(SamplingProgress):
        def generated(self, n):
            bar.generated(n)
            states.append(("generated", n))

        def reused(self, n):
            bar.reused(n)
            states.append(("reused", n, bar.bar.initial))

        def decided(self, asked):
            states.append(("decided", asked, bar.bar.n, bar.bar.initial))
            bar.decided(asked)

    list(sample_tasks(tasks, ScriptedBackend(), plan, Watch(), cached=cached))
    assert states[-1] == ("decided", 4, 4, 2)  # 4 done, 2 of them from the cache: not in the rate
    assert sum(s[1] for s in states if s[0] == "generated") == 2


def test_the_rate_runs_from_the_first_request_and_a_gated_task_leaves_the_total():
    import time

    bar = AttemptBar(10, 4)
    bar.decided(0)  # dropped by the judge gate: needed no sampling
    assert bar.bar.total == 36
    bar.bar.start_t -= 60  # a minute passes before the engine gets its first request
    before = time.time()
    bar.start_clock()
    assert bar.bar.start_t >= before - 1
    bar.generated(3)
    d = bar.bar.format_dict
    assert d["n"] == 3 and "1/10 tasks decided" in d["postfix"]  # the clock: start_t above
    bar.close()
    bar.generated(1)  # a late report after close is dropped, not raised
