"""Simulated pools and the GRPO-signal metric for bench/sampling_policies.py.

Two pools, each task with its true pass rate p (the simulation's), k outcomes
and tokens per attempt:

- `flat`: the published case's mix, nothing about a task says how hard it is
  (about 52% (nearly) always solved, 23% (nearly) never, 25% in between);
- `text`: tasks written from templates about topics; the template, its
  answer shape and the topic shift the odds of always / never / in between,
  and the in-between pass rate, plus noise (each task draws its component at
  random from those odds, and a tenth of the tasks ignore them). Its mix is
  close to `flat`'s.

The signal of a kept set is sum p(1 - p) over its tasks; `signal_kept` is
that over the tasks a policy keeps (learnable) / that over fixed-k's
learnable set. `streak_frontier` is the best any rule can do that sees only
a task's own outcomes with one prior for all (a pair of streak lengths after
which it stops), attempt by attempt: the limit on the `flat` pool.
"""

from __future__ import annotations

import random

# (template, answer shape, profile) - profile: (P always, P never, P between, mean p between)
TEMPLATES = [
    ("{n1} has {a} {obj}. {n2} gives {n1} {b} more {obj}. How many {obj} does {n1} have now?", "int", "easy"),
    ("A crate holds {a} {obj}. How many {obj} are there in {b} crates?", "int", "easy"),
    ("{n1} reads {a} pages about {obj} each day. How many pages does {n1} read in {b} days?", "int", "easy"),
    (
        "{n1} shares {a} {obj} equally among {b} friends. What fraction of the {obj} does each friend get?",
        "fraction",
        "mixed",
    ),
    (
        "The price of {obj} rose from {a} to {b} dollars. By what percent did it rise? Give two decimals.",
        "decimal",
        "mixed",
    ),
    (
        "A bag has {a} red and {b} blue {obj}. Two are drawn without replacement. What is the probability "
        "that both are red?",
        "fraction",
        "mixed",
    ),
    ("Let f(x) = {a}x^3 - {b}x be the number of {obj} after x weeks. Find the second derivative of f.", "expr", "hard"),
    (
        "In how many ways can {a} distinct {obj} be put in a row so that {b} given ones are never adjacent?",
        "int",
        "hard",
    ),
    ("Find the least prime p > {a} such that p + {b} {obj} can be split into two perfect squares.", "int", "hard"),
]
PROFILES = {"easy": (0.95, 0.01, 0.04, 0.75), "mixed": (0.25, 0.10, 0.65, 0.5), "hard": (0.03, 0.90, 0.07, 0.3)}
# Easy templates are the commonest, as in the published case (about half all-pass).
TEMPLATE_WEIGHTS = [{"easy": 1.6, "mixed": 1.0, "hard": 0.7}[prof] for _, _, prof in TEMPLATES]
OBJECTS = [
    "apples",
    "marbles",
    "stamps",
    "coins",
    "pencils",
    "books",
    "tickets",
    "shells",
    "cards",
    "bricks",
    "lamps",
    "kites",
    "boats",
    "chairs",
    "rings",
    "seeds",
    "tiles",
    "cups",
    "dolls",
    "hats",
    "keys",
    "maps",
    "nails",
    "pens",
    "ropes",
    "shoes",
    "spoons",
    "tents",
    "vases",
    "wheels",
]
NAMES = ["Ana", "Ben", "Chen", "Dara", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jun"]


def flat_pool(n: int, k: int, pass_tokens: list[int], fail_tokens: list[int], seed: int = 11):
    """(outcomes, tokens, p, task) per task; the published case's mix (bench/README)."""
    rng = random.Random(seed)
    tasks = []
    for i in range(n):
        u = rng.random()
        if u < 0.52:
            p = 1.0 if rng.random() < 0.85 else rng.betavariate(30, 1)
        elif u < 0.75:
            p = 0.0 if rng.random() < 0.85 else rng.betavariate(1, 30)
        else:
            p = rng.uniform(0.05, 0.95)
        outcomes = [int(rng.random() < p) for _ in range(k)]
        tokens = [rng.choice(pass_tokens if o else fail_tokens) for o in outcomes]
        task = {"task_id": f"f{i}", "domain": "math", "source": "vendor", "prompt": "", "answer": ""}
        tasks.append((outcomes, tokens, p, task))
    return tasks


def text_pool(n: int, k: int, pass_tokens: list[int], fail_tokens: list[int], seed: int = 11, noise: float = 0.1):
    """(outcomes, tokens, p, task) per task; the text partly predicts p."""
    rng = random.Random(seed)
    # Each topic makes every template a little easier or harder.
    topic_tilt = {o: rng.choice([(1.8, 0.6), (1.0, 1.0), (1.0, 1.0), (0.6, 1.8)]) for o in OBJECTS}
    tasks = []
    for i in range(n):
        tmpl, shape, prof = rng.choices(TEMPLATES, TEMPLATE_WEIGHTS)[0]
        obj = rng.choice(OBJECTS)
        w_all, w_none, w_mid, mid_mean = PROFILES[prof]
        up, down = topic_tilt[obj]
        w = [w_all * up, w_none * down, w_mid]
        if rng.random() < noise:
            w = [1.0, 1.0, 1.0]  # noise: this task ignores what its text says
        u = rng.random() * sum(w)
        if u < w[0]:
            p = 1.0 if rng.random() < 0.85 else rng.betavariate(30, 1)
        elif u < w[0] + w[1]:
            p = 0.0 if rng.random() < 0.85 else rng.betavariate(1, 30)
        else:
            mean = min(max(mid_mean * (up / down) ** 0.25, 0.1), 0.9)
            p = min(max(rng.betavariate(4 * mean, 4 * (1 - mean)), 0.05), 0.95)
        a, b = rng.randint(3, 60), rng.randint(2, 12)
        n1, n2 = rng.sample(NAMES, 2)
        prompt = tmpl.format(n1=n1, n2=n2, a=a, b=b, obj=obj)
        answer = {"int": str(a + b), "fraction": f"{a}/{a + b}", "decimal": f"{b / a:.2f}", "expr": f"{6 * a}x"}[shape]
        outcomes = [int(rng.random() < p) for _ in range(k)]
        tokens = [rng.choice(pass_tokens if o else fail_tokens) for o in outcomes]
        task = {
            "task_id": f"t{i}",
            "domain": "math",
            "source": "vendor",
            "prompt": prompt,
            "answer": answer,
            "_group": (tmpl, obj),
        }  # the bench's oracle only; the predictor reads prompt, answer, domain, source
        tasks.append((outcomes, tokens, p, task))
    return tasks


POOLS = {"flat": flat_pool, "text": text_pool}


def signal(p: float) -> float:
    return p * (1.0 - p)


def streak_frontier(pool, k: int, min_signal: float = 0.95) -> dict:
    """The fewest attempts (x fixed) of any stop-after-a-streaks rule (stop
    after `a` passes in a row or `b` fails in a row from the start, attempt
    by attempt) that keeps >= min_signal of fixed-k's signal on this pool."""
    fixed_sig = sum(signal(p) for o, _, p, _ in pool if 0 < sum(o[:k]) < k)
    best = None
    for a in range(1, k + 1):
        for b in range(1, k + 1):
            att, sig = 0, 0.0
            for o, _, p, _ in pool:
                n = 0
                while n < k:
                    n += 1
                    seen = o[:n]
                    if 0 < sum(seen) < n or (sum(seen) == n and n >= a) or (sum(seen) == 0 and n >= b):
                        break
                att += n
                if 0 < sum(o[:n]) < n:
                    sig += signal(p)
            ratio, kept = att / (k * len(pool)), sig / fixed_sig
            if kept >= min_signal and (best is None or ratio < best["attempts_ratio"]):
                best = {"a": a, "b": b, "attempts_ratio": ratio, "signal_kept": kept}
    return best or {}


def drive(next_fn, outcomes) -> tuple[int, int, int]:
    """(passes, attempts, engine waves) of one task under a stopping rule."""
    n = s = waves = 0
    while True:
        more = next_fn(n, s)
        if more == 0:
            return s, n, waves
        s += sum(outcomes[n : n + more])
        n += more
        waves += 1


def run_predicted(pool, k: int, keep_signal: float, waves=(2, 2, 4), chunk: int = 250):
    """Drive the `predicted` rule over the pool in chunks of `chunk` tasks (the
    stage's batches) with the stage's own predictor (prior_history.py): each
    chunk is predicted from the attempts of the chunks before it only (this
    rule's own, cut-short observations), the first from nothing. Yields
    (passes, attempts, waves, predicted p) per task."""
    from tasksieve.transforms.sample.predicted import next_predicted
    from tasksieve.transforms.sample.prior_history import OnlinePredictor

    predictor = OnlinePredictor(k, keep_signal)
    for lo in range(0, len(pool), chunk):
        part = pool[lo : lo + chunk]
        for (outcomes, _, _, task), (stops, predicted) in zip(part, predictor.plan([t for *_, t in part])):
            s, n, w = drive(lambda n, s: next_predicted(stops, k, waves, n, s), outcomes)
            predictor.observe(task, s, n)
            yield s, n, w, predicted
