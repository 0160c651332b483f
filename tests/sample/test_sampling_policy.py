"""Property tests of the per-task stopping rules (transforms/sample/policy.py).

Each test drives a policy over an outcome sequence (1 = pass) the way the
sampling stage does, wave by wave, and compares its decision with `fixed`.
"""

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from tasksieve.transforms.sample.classify import classify
from tasksieve.transforms.sample.policy import (
    Policy,
    next_attempts,
    posterior_interval,
    prob_in_band,
    prob_rest_all_same,
)

ks = st.integers(min_value=1, max_value=24)
waves = st.lists(st.integers(min_value=1, max_value=6), min_size=1, max_size=4).map(tuple)
priors = st.floats(min_value=0.05, max_value=5.0)
confidences = st.floats(min_value=0.55, max_value=0.999)


def drive(policy: Policy, outcomes: list[int]) -> tuple[str, int, list[int]]:
    """(status, attempts used, wave sizes asked for)."""
    n = p = 0
    asked = []
    while True:
        more = next_attempts(policy, n, p)
        if more == 0:
            return classify(p, n, policy.min_pass_rate, policy.max_pass_rate)["status"], n, asked
        asked.append(more)
        for _ in range(more):
            p += outcomes[n]
            n += 1


@st.composite
def outcome_runs(draw):
    k = draw(ks)
    return k, draw(st.lists(st.integers(0, 1), min_size=k, max_size=k))


@settings(max_examples=400, deadline=None)
@given(outcome_runs(), waves)
def test_sequential_decides_exactly_as_fixed(run, wave_sizes):
    k, outcomes = run
    fixed = drive(Policy("fixed", k), outcomes)
    seq = drive(Policy("sequential", k, wave_sizes), outcomes)
    assert seq[0] == fixed[0]
    assert seq[1] <= fixed[1] == k


@settings(max_examples=400, deadline=None)
@given(outcome_runs(), waves, priors, priors, confidences)
def test_bayes_never_exceeds_k_and_stops_at_the_first_pass_fail_pair(run, wave_sizes, a, b, conf):
    k, outcomes = run
    status, used, asked = drive(Policy("bayes", k, wave_sizes, prior_a=a, prior_b=b, confidence=conf), outcomes)
    assert 1 <= used <= k and sum(asked) == used
    seen = outcomes[:used]
    # Never claims more than it saw: all_pass means every attempt it made passed.
    assert status == {(True, False): "all_pass", (False, True): "all_fail"}.get((all(seen), not any(seen)), "learnable")
    # It asks for no wave beyond the one in which both outcomes first showed.
    seq = drive(Policy("sequential", k, wave_sizes), outcomes)
    assert used <= seq[1]


@settings(max_examples=300, deadline=None)
@given(outcome_runs(), waves, priors, priors, confidences)
def test_bayes_only_differs_from_fixed_by_stopping_a_streak_early(run, wave_sizes, a, b, conf):
    k, outcomes = run
    fixed_status, _, _ = drive(Policy("fixed", k), outcomes)
    status, used, _ = drive(Policy("bayes", k, wave_sizes, prior_a=a, prior_b=b, confidence=conf), outcomes)
    if status != fixed_status:
        # The one way to disagree: a streak judged all_pass/all_fail before k,
        # and the unseen attempts would have broken it.
        assert used < k and status in ("all_pass", "all_fail") and fixed_status == "learnable"


@settings(max_examples=200, deadline=None)
@given(outcome_runs(), waves, priors, priors)
def test_bayes_at_certainty_is_fixed(run, wave_sizes, a, b):
    """Demanding (almost) certainty, bayes decides like fixed: a streak never
    convinces it before k."""
    k, outcomes = run
    fixed_status, _, _ = drive(Policy("fixed", k), outcomes)
    status, _, _ = drive(Policy("bayes", k, wave_sizes, prior_a=a, prior_b=b, confidence=1 - 1e-12), outcomes)
    assert status == fixed_status


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 30), st.integers(1, 30), priors, priors)
def test_streak_probability_is_a_probability_and_falls_with_what_is_left(n, m, a, b):
    p1 = prob_rest_all_same(a, b, n, n, m)
    p2 = prob_rest_all_same(a, b, n, n, m + 1)
    assert 0 < p2 <= p1 <= 1
    # ...and rises with a longer streak seen.
    assert prob_rest_all_same(a, b, n + 1, n + 1, m) >= p1


def test_streak_probability_matches_the_beta_moment():
    # Two passes on a uniform prior: Beta(3, 1), and E[p^2] = 3/4 * 4/5.
    assert math.isclose(prob_rest_all_same(1.0, 1.0, 2, 2, 2), 3 / 4 * 4 / 5)


def test_a_u_shaped_prior_stops_an_all_pass_streak_early_and_a_uniform_one_does_not():
    u_shaped = Policy("bayes", 8, (2, 2, 4), prior_a=0.1, prior_b=0.1, confidence=0.9)
    uniform = Policy("bayes", 8, (2, 2, 4), prior_a=1.0, prior_b=1.0, confidence=0.9)
    assert drive(u_shaped, [1] * 8)[1] == 4
    assert drive(uniform, [1] * 8)[1] == 8


@settings(max_examples=200, deadline=None)
@given(outcome_runs(), priors, priors, confidences)
def test_bayes_with_a_narrowed_band_stops_when_confident(run, a, b, conf):
    k, outcomes = run
    pol = Policy("bayes", k, (2,), 0.2, 0.8, a, b, conf)
    _, used, _ = drive(pol, outcomes)
    p = sum(outcomes[:used])
    inside = prob_in_band(a + p, b + used - p, 0.2, 0.8)
    if used < k:
        assert inside >= conf or inside <= 1 - conf


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 16), st.integers(1, 16), priors, priors)
def test_posterior_interval_is_ordered_and_contains_the_posterior_mean(p, n, a, b):
    p = min(p, n)
    lo, hi = posterior_interval(Policy("bayes", 16, prior_a=a, prior_b=b), p, n)
    mean = (a + p) / (a + b + n)
    assert 0 <= lo <= mean <= hi <= 1
