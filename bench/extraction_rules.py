"""What each math answer-extraction rule does to the learnable count: the
same recorded completions (a finished run's attempts.parquet, e.g. the
demo's) re-verified under several rule sets, side by side.

    .venv/bin/python bench/extraction_rules.py demo-out

Rule sets:
- `before`: the rules before the hack-proofing (last box wins, last answer
  phrase, last "= N" anywhere, else the last number anywhere);
- `boxed+phrase`: rules 1-2 of transforms/verify/math_answers.py only;
- `current`: rules 1-3 (the last-number rule narrowed to a sentence with one
  number the prompt does not state);
- `current, prompt numbers allowed`: rule 3 without the prompt exclusion.

A task is learnable when its attempts hold at least one pass and one fail.
The attempts are the ones the run sampled (its stopping rule decided on
the `current` verdicts), so the other columns are "the same completions,
judged differently", not a re-run.
"""

from __future__ import annotations

import argparse
import re
from collections import defaultdict

import pyarrow.parquet as pq

from tasksieve.transforms.verify import math_answers as vm

_OLD_RESULT = re.compile(r"(?:=|\bequals?\b|\bis equal to\b)\s*\$?\s*(-?\d[\d,]*(?:\.\d+)?(?:/\d+)?)")


def before(completion: str, prompt: str) -> list[str]:
    boxed = vm._boxed_all(completion)
    if boxed:
        return [boxed[-1]]
    for m in reversed(list(vm._ANSWER_PHRASE.finditer(completion))):
        tail = completion[m.end() :].strip()
        line = (tail.splitlines()[0] if tail else "").strip().rstrip(".").strip().strip("$").strip()
        if line and vm._HAS_MATH.search(line):
            return [line]
        break
    results = _OLD_RESULT.findall(completion)
    if results:
        return [results[-1].replace(",", "")]
    numbers = vm._NUMBER.findall(completion)
    return [numbers[-1].replace(",", "")] if numbers else []


def boxed_phrase(completion: str, prompt: str) -> list[str]:
    answers, rule = vm.extract_final_answers(completion, prompt)
    return answers if rule in ("boxed", "phrase") else []


def current(completion: str, prompt: str) -> list[str]:
    return vm.extract_final_answers(completion, prompt)[0]


def current_prompt_numbers(completion: str, prompt: str) -> list[str]:
    return vm.extract_final_answers(completion, "")[0]


RULES = {
    "before": before,
    "boxed+phrase": boxed_phrase,
    "current": current,
    "current, prompt numbers allowed": current_prompt_numbers,
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", help="a finished run's output folder")
    args = ap.parse_args()
    results = {
        r["content_hash"]: r
        for r in pq.read_table(f"{args.out}/results.parquet").to_pylist()
        if r.get("content_hash") and r["domain"] == "math" and r["n_attempts"]
    }
    attempts = [a for a in pq.read_table(f"{args.out}/attempts.parquet").to_pylist() if a["content_hash"] in results]
    cache: dict[tuple, bool] = {}
    print(f"{len(results)} math tasks sampled, {len(attempts)} attempts ({args.out})")
    print(f"{'rule set':<34}{'passing attempts':>18}{'learnable':>11}{'all_pass':>10}{'all_fail':>10}")
    for name, rule in RULES.items():
        outcomes = defaultdict(list)
        passing = 0
        for a in attempts:
            task = results[a["content_hash"]]
            answers = rule(a["completion"] or "", task["prompt"] or "")
            ok = bool(answers)
            for ans in answers:
                key = (task["answer"], ans)
                if key not in cache:
                    cache[key] = bool(
                        vm.ask_with_deadline(
                            {"op": "math", "reference": task["answer"], "candidate": ans[: vm.MAX_CANDIDATE_CHARS]}, 5.0
                        )["ok"]
                    )
                ok = ok and cache[key]
            passing += ok
            outcomes[a["content_hash"]].append(ok)
        learnable = sum(1 for v in outcomes.values() if any(v) and not all(v))
        all_pass = sum(1 for v in outcomes.values() if all(v))
        all_fail = sum(1 for v in outcomes.values() if not any(v))
        print(f"{name:<34}{passing:>18}{learnable:>11}{all_pass:>10}{all_fail:>10}")


if __name__ == "__main__":
    main()
