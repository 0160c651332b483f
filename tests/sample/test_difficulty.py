"""The difficulty predictor (transforms/sample/difficulty.py) and the
`predicted` stopping rule (transforms/sample/predicted.py)."""

import random

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tasksieve.transforms.sample.difficulty import (
    GRID,
    DifficultyModel,
    answer_shape,
    beta_on_grid,
    calibration,
    mean,
    posterior,
)
from tasksieve.transforms.sample.predicted import expected, next_predicted, price_for, stop_points


def _task(prompt, answer="4", domain="math", source="v"):
    return {"prompt": prompt, "answer": answer, "domain": domain, "source": source}


def _planted(n=400, seed=0):
    """Tasks about apples always pass, about zebras never, about kites half the time."""
    rng = random.Random(seed)
    tasks, passes = [], []
    for i in range(n):
        topic, p = rng.choice([("apples", 1.0), ("zebras", 0.0), ("kites", 0.5)])
        tasks.append(
            _task(
                f"{rng.choice(['Ana', 'Ben'])} counts {rng.randint(2, 90)} {topic} in the {topic} shed. "
                f"How many {topic} are left after {rng.randint(1, 9)}?"
            )
        )
        passes.append(sum(rng.random() < p for _ in range(4)))
    return tasks, passes


def test_it_learns_a_planted_dependence_of_pass_rate_on_topic():
    tasks, passes = _planted()
    model = DifficultyModel().fit(tasks, passes, [4] * len(tasks))
    new = [
        _task("Eli counts 17 apples in the apples shed. How many apples are left after 3?"),
        _task("Eli counts 17 zebras in the zebras shed. How many zebras are left after 3?"),
        _task("Eli counts 17 kites in the kites shed. How many kites are left after 3?"),
    ]
    apples, zebras, kites = mean(model.priors(new))
    assert apples > 0.9 and zebras < 0.1 and 0.3 < kites < 0.7
    # ...and says so with confidence: most of the apple prior's mass at p = 1.
    assert model.priors(new[:1])[0][-1] > 0.8


def test_a_shuffled_history_teaches_nothing_about_topic():
    """The same history with the outcomes shuffled across topics: the topic
    no longer predicts anything, so the apple and zebra tasks look alike."""
    tasks, passes = _planted()
    shuffled = passes[:]
    random.Random(1).shuffle(shuffled)
    model = DifficultyModel().fit(tasks, shuffled, [4] * len(tasks))
    apples, zebras = mean(
        model.priors(
            [
                _task("Eli counts 17 apples in the apples shed. How many apples are left?"),
                _task("Eli counts 17 zebras in the zebras shed. How many zebras are left?"),
            ]
        )
    )
    assert abs(apples - zebras) < 0.15


def test_with_nothing_known_the_prior_is_the_configured_flat_one():
    model = DifficultyModel(prior_a=0.1, prior_b=0.1)
    flat = beta_on_grid(0.1, 0.1)
    assert np.allclose(model.priors([_task("What is 2 + 2?")]), flat)
    assert np.allclose(model.fit([], [], []).priors([_task("What is 2 + 2?")]), flat)
    # History without a single attempt is no history.
    assert np.allclose(model.fit([_task("x")], [0], [0]).priors([_task("What is 2 + 2?")]), flat)


def test_a_task_unlike_any_in_the_history_gets_the_pool_wide_prior():
    tasks, passes = _planted()
    model = DifficultyModel().fit(tasks, passes, [4] * len(tasks))
    (prior,) = model.priors([_task("Прове́рьте", answer="", domain="code", source="other")])
    assert np.allclose(prior, model.global_prior())
    # The pool-wide prior learned the mix: about a third never passes.
    assert 0.2 < model.global_prior()[0] < 0.45


def test_answer_shapes():
    assert [answer_shape(_task("q", a)) for a in ("12", "-3.5", "3/4", "2x+1", "Paris", "")] == [
        "int",
        "decimal",
        "fraction",
        "expr",
        "text",
        "none",
    ]
    assert answer_shape(_task("q", None, domain="code")) == "code"


def test_calibration_scores_and_bins():
    perfect = calibration([0.0, 1.0, 0.5], [0.0, 1.0, 0.5])
    assert perfect["brier"] == 0.0 and perfect["n"] == 3
    bad = calibration([1.0, 0.0], [0.0, 1.0])
    assert bad["brier"] == 1.0 and bad["brier_constant"] == 0.25
    bins = calibration([0.05, 0.07, 0.95], [0.0, 0.5, 1.0])["bins"]
    assert [(b["bin_lo"], b["n"]) for b in bins] == [(0.0, 2), (0.9, 1)]
    assert bins[0]["realised"] == 0.25
    assert calibration([float("nan")], [1.0])["n"] == 0


def _point(*mass):
    """A prior with the given {p: weight} on the grid."""
    w = np.zeros_like(GRID)
    for p, m in mass:
        w[int(round(p * 50))] += m
    return w / w.sum()


def test_stop_points_hand_worked():
    # Certainly always solved: one attempt is worth nothing; stop after one pass.
    a, b = stop_points(_point((1.0, 1.0)), 8, 0.001)
    assert a[0] == 1
    # A coin: every attempt is worth 0.25 * 0.5 = 0.125 > price: never stops a streak early.
    a, b = stop_points(_point((0.5, 1.0)), 8, 0.001)
    assert (a[0], b[0]) == (8, 8)
    # 90% always solved, 10% a coin; price 0.005. After n passes the coin's
    # weight is 0.1 * 0.5^n / (0.9 + 0.1 * 0.5^n) and the next attempt is
    # worth that * 0.125: n = 1 -> 0.0066 (go on), n = 2 -> 0.0034 (stop).
    a, _ = stop_points(_point((1.0, 0.9), (0.5, 0.1)), 8, 0.005)
    assert a[0] == 2
    a, _ = stop_points(_point((1.0, 0.9), (0.5, 0.1)), 8, 0.007)
    assert a[0] == 1


def test_next_predicted_waves():
    waves = (2, 2, 4)
    assert next_predicted((1, 8), 8, waves, 0, 0) == 1  # confident all-pass: a one-attempt screening
    assert next_predicted((1, 8), 8, waves, 1, 1) == 0  # it passed: done, all_pass
    assert next_predicted((1, 8), 8, waves, 1, 0) == 1  # it failed: on with the schedule (its wave 1 ends at 2)
    assert next_predicted((1, 8), 8, waves, 2, 0) == 2
    assert next_predicted((8, 8), 8, waves, 0, 0) == 2  # nothing confident: the schedule's first wave
    assert next_predicted((8, 8), 8, waves, 2, 1) == 0  # a pass and a fail: learnable
    assert next_predicted((3, 8), 8, waves, 2, 2) == 1  # the wave ends at the stop point
    assert next_predicted((8, 8), 8, waves, 4, 0) == 4
    assert next_predicted((8, 8), 8, waves, 8, 8) == 0


def _drive(stops, k, waves, outcomes):
    n = s = 0
    while True:
        m = next_predicted(stops, k, waves, n, s)
        if m == 0:
            return s, n
        s += sum(outcomes[n : n + m])
        n += m


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 16),
    st.lists(st.integers(0, 1), min_size=16, max_size=16),
    st.lists(st.floats(0.0, 1.0), min_size=len(GRID), max_size=len(GRID)),
)
def test_at_price_zero_it_decides_exactly_as_fixed(k, outcomes, weights):
    """Demanding every bit of signal (price 0) no streak stops early, whatever
    the prior: the keep/drop decision is fixed's."""
    w = np.asarray(weights) + 1e-9
    prior = w / w.sum()
    a, b = stop_points(prior, k, 0.0)
    s, n = _drive((int(a[0]), int(b[0])), k, (2, 2, 4), outcomes[:k])
    fixed = outcomes[:k]
    assert (0 < s < n) == (0 < sum(fixed) < k)
    assert n <= k


def test_price_for_meets_the_expected_signal_target():
    priors = np.stack([_point((1.0, 0.9), (0.6, 0.1)), _point((0.0, 0.5), (0.3, 0.5)), beta_on_grid(0.1, 0.1)])
    for keep in (0.9, 0.95, 0.99):
        price = price_for(priors, 8, keep, min_price=0.0)
        fixed, lost, attempts = expected(priors, 8, *stop_points(priors, 8, price))
        assert lost <= (1 - keep) * fixed + 1e-12
        # ...and is the largest such price (to its 2% step).
        _, lost_more, _ = expected(priors, 8, *stop_points(priors, 8, price * 1.05))
        assert lost_more > (1 - keep) * fixed or price * 1.05 >= 0.25
    # The more signal it must keep, the more attempts it spends.
    spent = [
        expected(priors, 8, *stop_points(priors, 8, price_for(priors, 8, keep, 0.0)))[2] for keep in (0.8, 0.95, 0.999)
    ]
    assert spent[0] <= spent[1] <= spent[2] and spent[0] < spent[2]


def test_posterior_moves_towards_what_was_seen():
    flat = beta_on_grid(1.0, 1.0)
    assert mean(posterior(flat, 4, 4)) > mean(flat) > mean(posterior(flat, 0, 4))


def test_a_batch_predicted_to_hold_no_signal_is_still_screened():
    """Every task predicted all-pass or all-fail: 95% of (almost) no signal
    would mean k attempts each; the price floor stops that."""
    priors = np.stack([_point((1.0, 0.999), (0.5, 0.001)), _point((0.0, 0.999), (0.5, 0.001))])
    a, b = stop_points(priors, 8, price_for(priors, 8, 0.95))
    assert a[0] == 1 and b[1] == 1
    assert price_for(priors, 8, 0.95, min_price=0.0) < 1e-4


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 16),
    st.integers(1, 16),
    st.integers(1, 16),
    st.lists(st.integers(0, 1), min_size=16, max_size=16),
    st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple),
)
def test_predicted_stops_exactly_at_its_stop_points(k, a, b, outcomes, waves):
    """Never past k; a pass and a fail end it; a streak ends at its stop
    point (a passes or b fails in a row), never before; and it only differs
    from fixed by calling a streak that the unseen attempts would break."""
    s, n = _drive((a, b), k, waves, outcomes[:k])
    seen = outcomes[:n]
    assert 1 <= n <= k
    if 0 < s < n:
        first_mixed = next(i for i in range(1, n + 1) if 0 < sum(seen[:i]) < i)
        assert n - first_mixed < max(waves)  # only the rest of that wave
    elif s == n:
        assert n == min(a, k)
    else:
        assert n == min(b, k)
    fixed = outcomes[:k]
    if (0 < s < n) != (0 < sum(fixed) < k):
        assert not (0 < s < n) and n < k
