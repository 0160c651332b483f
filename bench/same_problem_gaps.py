"""Held-out-style cases for the four gaps of issue 43, generated, with a dev
seed and a separate held-out seed, each case judged alone (a two-task
delivery for near dedup, one task against the bundled benchmarks for
decontamination):

    .venv/bin/python bench/same_problem_gaps.py [--seed 1] [--per-gap 40] [--json out.json]

- `variant`: a task and the same text with one quantity edited (its answer
  recomputed, or unchanged when the edited number does not enter it):
  must be caught (one of the two dropped). Sources: GSM8K test items with
  3+ numbers (answer moved) and word-problem templates of several domains
  and languages (answer computed). Control `sibling`: the template filled
  anew (other names, every number redrawn, answer computed): both kept.
- `shared_setup`: two different questions on one setup (a GSM8K item's
  setup with its own question and another item's; a sequence, a figure or
  a story with two questions answered by a number, yes/no, a name or a
  set; a fifth without answers, the asked thing replaced): both kept.
- `reworded_item`: a GSM8K test item with its names and objects swapped
  (names from several languages, a wide object list), numbers and answer
  unchanged: must be caught by decontamination. Control `reworded_other`:
  the same rewording with every number redrawn and the answer changed: a
  look-alike, must stay clean.
- `added_sentence`: a task (GSM8K test item or template filling) with one
  sentence added at its start, middle or end (filler, context, an
  instruction, a distractor with numbers): must be caught.

Nothing here is tuned to the issue's examples; run it with the code before
a change (another checkout on PYTHONPATH) and after, same seed.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from same_problem_gap_cases import added_sentences, reworded_items, shared_setups, siblings, variants  # noqa: E402
from tasksieve.transforms.normalize import with_hash  # noqa: E402


def _task(tid, prompt, answer, day=1, line=0):
    return with_hash(
        {
            "task_id": tid,
            "source": "v",
            "domain": "math",
            "prompt": prompt,
            "answer": None if answer is None else str(answer),
            "created_at": f"2026-01-{day:02d}",
            "source_file": "v.jsonl",
            "line": line,
        }
    )


# --- judging ---------------------------------------------------------------------------------


def _pair_dropped(a, ans_a, b, ans_b) -> bool:
    from tasksieve.transforms.dedup.minhash import MinHashParams
    from tasksieve.transforms.dedup.near import find_near_duplicates

    rows = [_task("a", a, ans_a, 1, 0), _task("b", b, ans_b, 2, 1)]
    return any(tag == "dropped" for tag, _ in find_near_duplicates(rows, [], MinHashParams(), 0.7))


def run(seed: int, per_gap: int) -> dict:
    from tasksieve.schemas.config import DecontamConfig
    from tasksieve.transforms.decontam.index import build_index, index_options

    rng = random.Random(seed)
    res: dict = {"seed": seed}
    t0 = time.perf_counter()
    v = variants(rng, per_gap)
    res["variants_caught"] = [sum(_pair_dropped(a, x, b, y) for a, x, b, y, _ in v), len(v)]
    s = siblings(rng, per_gap)
    res["siblings_broken"] = [sum(_pair_dropped(a, x, b, y) for a, x, b, y, _ in s), len(s)]
    sh = shared_setups(rng, per_gap)
    res["shared_setups_merged"] = [sum(_pair_dropped(a, x, b, y) for a, x, b, y, _ in sh), len(sh)]
    ad = added_sentences(rng, per_gap)
    res["added_sentence_caught"] = [sum(_pair_dropped(a, x, b, x) for a, x, b, _ in ad), len(ad)]
    caught, clean = reworded_items(rng, per_gap)
    index = build_index(8, ["gsm8k", "aime2025", "gpqa_diamond", "humaneval"], [], **index_options(DecontamConfig()))

    def hit(text, ans, iid):
        ev = index.judge(_task("r", text, ans))
        return ev is not None and ev.get("benchmark_item") in (iid, iid + "/answer")

    res["reworded_items_caught"] = [sum(hit(*c) for c in caught), len(caught)]
    res["reworded_lookalikes_dropped"] = [
        sum(index.judge(_task("r", t, a)) is not None for t, a, _ in clean),
        len(clean),
    ]
    res["seconds"] = round(time.perf_counter() - t0, 1)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, action="append", help="1: dev, 2: held-out (default: both)")
    ap.add_argument("--per-gap", type=int, default=40)
    ap.add_argument("--json")
    args = ap.parse_args()
    out = [run(s, args.per_gap) for s in (args.seed or [1, 2])]
    for r in out:
        print(f"seed {r['seed']} ({r['seconds']} s):")
        for k, v in r.items():
            if isinstance(v, list):
                print(f"  {k:<30}{v[0]:>4}/{v[1]:<4}{v[0] / v[1]:>7.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
