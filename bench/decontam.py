"""Decontamination benchmark: recall on planted benchmark items (verbatim
and lightly reworded) and false positives on text never published.

    .venv/bin/python bench/decontam.py [--per-benchmark 200]

Positives: items of the bundled benchmarks (GSM8K test, AIME 2025, GPQA
diamond, HumanEval), each embedded in a task prompt ("Solve the following
problem. ... Show your work."), once verbatim and once reworded: common
words swapped for synonyms and every sixth word dropped, which breaks
most long n-grams while a reader still sees the same item.
Negatives: benchleak's control set (passages written for that project and
never published: grade-school math problems and general prose; read from
the package in `.venv-peers`) and reasoning-gym arithmetic tasks.

Settings compared: n-gram only at n = 13 (lm-evaluation-harness), 12
(datatrove) and 8 (open-r1), tasksieve's words-only rules (n-gram +
short-item + fuzzy, the default before the same-problem judgement), the
same candidates confirmed with `[decontam] semantic = false`, and its
default (those candidates plus meaning, each confirmed on numbers, the
reference answer and code behaviour; transforms/same_problem/rules.py). Tasks
carry the item's reference answer where the benchmark ships one.
Throughput is shown relative to the 13-gram-only check, on the positives
(every one a candidate) and on the negatives (clean tasks, the bulk of a
real delivery); a last table gives the cost of the confirmation: each
confirmed setting against the words-only rules (confirmation OFF).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import time
from pathlib import Path

from tasksieve.transforms.decontam.benchmarks import BUNDLED, ITEMS
from tasksieve.transforms.decontam.index import build_index
from tasksieve.schemas.config import DecontamConfig
from tasksieve.transforms.decontam.index import index_options

ROOT = Path(__file__).resolve().parent.parent
PEERS_PY = ROOT / ".venv-peers" / "bin" / "python"
SYNONYMS = {
    "how": "in what way",
    "many": "numerous",
    "each": "every",
    "buys": "purchases",
    "has": "owns",
    "total": "overall",
    "find": "determine",
    "what": "which",
    "the": "a",
    "is": "equals",
    "are": "were",
    "number": "count",
    "of": "from",
    "and": "plus",
    "many?": "numerous?",
    "per": "for each",
}


def reword(text: str) -> str:
    out = []
    for i, w in enumerate(text.split()):
        if i % 6 == 3:
            continue
        out.append(SYNONYMS.get(w.lower(), w))
    return " ".join(out)


def positives(per: int, rng: random.Random) -> list[tuple[str, str, str]]:
    """(benchmark, item id, text) of sampled questions (worked answers skipped)."""
    items = []
    for name, load in BUNDLED.items():
        qs = [(name, i, t) for i, t in load() if not i.endswith("/answer")]
        items += rng.sample(qs, min(per, len(qs)))
    return items


def negatives() -> dict[str, list[str]]:
    code = (
        "import json\nfrom benchleak.data import load_reference\n"
        "print(json.dumps(load_reference(domain='math') + load_reference()))"
    )
    out = {}
    if PEERS_PY.exists():
        out["benchleak control set"] = json.loads(
            subprocess.run([str(PEERS_PY), "-c", code], capture_output=True, text=True, check=True).stdout
        )
    import reasoning_gym as rg

    out["reasoning-gym arithmetic"] = [
        x["question"]
        for x in rg.create_dataset(
            "basic_arithmetic", size=500, seed=7, min_terms=2, max_terms=5, min_digits=1, max_digits=3
        )
    ]
    return out


def _as_task(prompt: str, answer) -> dict:
    return {"task_id": "t", "domain": "math", "prompt": prompt, "answer": answer}


ANSWERS = {(name, item["id"]): item.get("answer") for name, load in ITEMS.items() for item in load()}


def wrap(q: str) -> str:
    return f"Solve the following problem.\n\n{q}\n\nShow your work and give the final answer."


def print_confirmation_cost(rates: dict) -> None:
    """Throughput of the confirmation (and of the meaning generator) against
    the words-only rules, measured in the same run."""
    labels = list(rates)
    off = next(k for k in labels if k.startswith("tasksieve words only"))
    print(f"\nconfirmation ON vs OFF (OFF = {off}), tasks/s and ratio to OFF")
    print(f"{'setting':<56}{'positives/s':>12}{'ratio':>7}{'clean/s':>10}{'ratio':>7}")
    for k in labels[labels.index(off) :]:
        (r, c), (r0, c0) = rates[k], rates[off]
        print(f"{k:<56}{r:>12,.1f}{r / r0:>7.3f}{c:>10,.1f}{c / c0:>7.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-benchmark", type=int, default=200)
    args = ap.parse_args()
    rng = random.Random(0)
    pos = positives(args.per_benchmark, rng)
    verbatim = [wrap(t) for _, _, t in pos]
    # The items' own reference answers go with them (GSM8K, AIME); a task
    # copied from a benchmark usually carries its answer.
    answers = [ANSWERS.get((b, i)) for b, i, _ in pos]
    reworded = [wrap(reword(t)) for _, _, t in pos]
    negs = negatives()
    benches = list(BUNDLED)
    default = DecontamConfig()
    only = {"fuzzy": False, "short_min_words": 10**6, "confirm": False, "semantic": False}
    settings = [
        ("13-gram only (lm-eval-harness)", 13, only),
        ("12-gram only (datatrove)", 12, only),
        ("8-gram only (open-r1)", 8, only),
        (
            f"tasksieve words only ({default.ngram}-gram + short + fuzzy)",
            default.ngram,
            dict(index_options(default), confirm=False, semantic=False),
        ),
        ("tasksieve confirmed, semantic = false", default.ngram, dict(index_options(default), semantic=False)),
        ("tasksieve same-problem (default: + meaning, confirmed)", default.ngram, index_options(default)),
    ]
    print(
        f"positives: {len(pos)} benchmark items ({', '.join(benches)}), each verbatim and reworded; "
        f"negatives: " + ", ".join(f"{k} ({len(v)})" for k, v in negs.items())
    )
    head = f"{'setting':<56}{'verbatim':>9}{'reworded':>9}" + "".join(f"{'FP ' + k.split()[0]:>18}" for k in negs)
    print(head + f"{'tasks/s':>9}{'ratio':>7}{'clean/s':>10}{'ratio':>7}")
    base = neg_base = None
    rates = {}
    for label, n, opts in settings:
        index = build_index(n, benches, [], **opts)
        t0 = time.perf_counter()
        v = sum(index.judge(_as_task(t, a)) is not None for t, a in zip(verbatim, answers))
        r = sum(index.judge(_as_task(t, a)) is not None for t, a in zip(reworded, answers))
        rate = (len(verbatim) + len(reworded)) / (time.perf_counter() - t0)
        base = base or rate
        fps = []
        t0, n_neg = time.perf_counter(), 0
        for texts in negs.values():
            fps.append(f"{sum(index.judge(_as_task(t, None)) is not None for t in texts)}/{len(texts)}")
            n_neg += len(texts)
        neg_rate = n_neg / (time.perf_counter() - t0)
        neg_base = neg_base or neg_rate
        rates[label] = (rate, neg_rate)
        print(
            f"{label:<56}{v / len(pos):>9.3f}{r / len(pos):>9.3f}"
            + "".join(f"{x:>18}" for x in fps)
            + f"{rate:>9,.0f}{rate / base:>7.2f}{neg_rate:>10,.0f}{neg_rate / neg_base:>7.2f}"
        )
    print_confirmation_cost(rates)
    sample = next(t for t in reworded if re.search(r"\d", t))
    print("\nexample reworded item:", sample[:240].replace("\n", " "), "...")


if __name__ == "__main__":
    main()
