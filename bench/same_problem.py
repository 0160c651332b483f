"""Same-problem judgement on the hard-case set (bench/same_problem_cases.py),
side by side with the peers' default rules, in one run:

    .venv/bin/python bench/same_problem.py [--json out.json]

Decontamination (each task judged alone against GSM8K test, AIME 2025, GPQA
diamond and HumanEval):
- lm-evaluation-harness: any shared 13-word n-gram;
- datatrove: any shared 12-word n-gram;
- open-r1: any shared 8-word n-gram;
- tasksieve, words only (the rules before issue 13): 8-gram + short item +
  60% in-order coverage, no confirmation;
- tasksieve same-problem (default): those candidates plus meaning, confirmed
  on numbers, reference answer and code behaviour.
Columns: share of clean look-alikes dropped (lower is better), per kind; share
of rewordings caught (higher is better), per kind; translations apart.

Near dedup (each pair judged alone, as a two-task delivery):
- datatrove MinHash defaults (5-word shingles, 14 bands x 8 rows, a shared
  bucket is a duplicate; reimplemented on tasksieve's MinHash code, as
  datatrove itself needs the peers venv);
- tasksieve MinHash (the stage before issue 13: 5-character shingles,
  exact Jaccard >= 0.7 + number guard; no answers, no meaning);
- tasksieve same-problem (default): plus quantity-grouped meaning and the
  answer rule.
Columns: paraphrase pairs caught, per kind; template-sibling pairs broken.
Also: time per task of each decontamination setting on the whole set.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import same_problem_cases as cases  # noqa: E402

from tasksieve.schemas.config import DecontamConfig  # noqa: E402
from tasksieve.transforms.decontam.index import build_index, index_options  # noqa: E402
from tasksieve.transforms.dedup.near import find_near_duplicates  # noqa: E402
from tasksieve.transforms.dedup.minhash import MinHashParams, band_keys, shingle_hashes, signature  # noqa: E402
from tasksieve.transforms.normalize import normalize_text, with_hash  # noqa: E402

BENCHES = ["gsm8k", "aime2025", "gpqa_diamond", "humaneval"]
NGRAM_ONLY = {"fuzzy": False, "short_min_words": 10**6, "confirm": False, "semantic": False}


def decontam_settings():
    d = DecontamConfig()
    words_only = dict(index_options(d), confirm=False, semantic=False)
    return [
        ("lm-eval-harness 13-gram", 13, NGRAM_ONLY),
        ("datatrove 12-gram", 12, NGRAM_ONLY),
        ("open-r1 8-gram", 8, NGRAM_ONLY),
        ("tasksieve words only (before)", d.ngram, words_only),
        ("tasksieve same-problem (default)", d.ngram, index_options(d)),
    ]


def run_decontam(look, rew, trans):
    out = []
    for label, n, opts in decontam_settings():
        index = build_index(n, BENCHES, [], **opts)
        t0 = time.perf_counter()
        flagged = {r["task_id"]: index.judge(r) for r in look + rew + trans}
        per_task = (time.perf_counter() - t0) / (len(look) + len(rew) + len(trans))
        row = {"setting": label, "seconds_per_task": round(per_task, 4), "lookalikes_dropped": {}, "rewordings_caught": {}}
        for group, rows, key in ((look, "lookalikes_dropped", None), (rew + trans, "rewordings_caught", None)):
            by_kind: Counter = Counter()
            tot: Counter = Counter()
            for r in group:
                tot[r["kind"]] += 1
                hit = flagged[r["task_id"]]
                if rows == "rewordings_caught" and hit is not None:
                    hit = hit if hit["benchmark_item"] in (r["benchmark_item"], r["benchmark_item"] + "/answer") else None
                by_kind[r["kind"]] += hit is not None
            row[rows] = {k: [by_kind[k], tot[k]] for k in tot}
        lk = row["lookalikes_dropped"]
        rw = {k: v for k, v in row["rewordings_caught"].items() if not k.startswith("translation")}
        tr = {k: v for k, v in row["rewordings_caught"].items() if k.startswith("translation")}
        row["lookalike_drop_rate"] = round(sum(v[0] for v in lk.values()) / sum(v[1] for v in lk.values()), 4)
        row["rewording_recall"] = round(sum(v[0] for v in rw.values()) / sum(v[1] for v in rw.values()), 4)
        row["translation_recall"] = [sum(v[0] for v in tr.values()), sum(v[1] for v in tr.values())]
        out.append(row)
    return out


def _row(t, i, day):
    return with_hash(dict(t, source="v", created_at=f"2026-01-{day:02d}", source_file="v.jsonl", line=i))


def datatrove_pair(a: str, b: str) -> bool:
    """datatrove's defaults: 5-word shingles of its normalised text, 112
    permutations, 14 buckets x 8; any shared bucket removes one."""
    ka, kb = (set(band_keys(signature(shingle_hashes(normalize_text(t), "word", 5), 112, 1), 14, 8)) for t in (a, b))
    return bool(ka & kb)


def run_near(pp, sib):
    p = MinHashParams()
    settings = [
        ("datatrove MinHash (5-word, 14x8)", lambda a, b: datatrove_pair(a["prompt"], b["prompt"])),
        ("tasksieve MinHash (before)", lambda a, b: _ts(a, b, p, semantic=False, answers=False)),
        ("tasksieve same-problem (default)", lambda a, b: _ts(a, b, p, semantic=True, answers=True)),
    ]
    out = []
    for label, fn in settings:
        t0 = time.perf_counter()
        caught: Counter = Counter()
        tot: Counter = Counter()
        for a, b in pp:
            tot[a["kind"]] += 1
            caught[a["kind"]] += fn(a, b)
        broken = sum(fn(a, b) for a, b in sib)
        secs = (time.perf_counter() - t0) / (len(pp) + len(sib))
        out.append({"setting": label, "paraphrases_caught": {k: [caught[k], tot[k]] for k in tot},
                    "paraphrase_recall": round(sum(caught.values()) / len(pp), 4),
                    "siblings_broken": [broken, len(sib)], "seconds_per_pair": round(secs, 4)})
    return out


def _ts(a, b, p, semantic, answers):
    if not answers:
        a, b = dict(a, answer=None), dict(b, answer=None)
    res = list(find_near_duplicates([_row(a, 0, 1), _row(b, 1, 2)], [], p, 0.7, semantic=semantic))
    return sum(tag == "dropped" for tag, _ in res) == 1


def _fmt(v):
    return f"{v[0]}/{v[1]}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    look, rew, trans = cases.lookalikes(), cases.rewordings(), cases.translations()
    pp, sib = cases.paraphrase_pairs(), cases.sibling_pairs()
    print(f"hard-case set: {len(look)} clean look-alikes, {len(rew)} rewordings (+{len(trans)} translations), "
          f"{len(pp)} paraphrase pairs, {len(sib)} template-sibling pairs")
    dec = run_decontam(look, rew, trans)
    kinds_l = list(dec[0]["lookalikes_dropped"])
    kinds_r = [k for k in dec[0]["rewordings_caught"] if not k.startswith("translation")]
    print("\nDecontamination: clean look-alikes dropped (lower is better)")
    print(f"{'setting':<36}{'all':>9}" + "".join(f"{k[:14]:>16}" for k in kinds_l) + f"{'s/task':>9}")
    for r in dec:
        lk = r["lookalikes_dropped"]
        print(f"{r['setting']:<36}{r['lookalike_drop_rate']:>9.3f}" + "".join(f"{_fmt(lk[k]):>16}" for k in kinds_l)
              + f"{r['seconds_per_task']:>9.3f}")
    print("\nDecontamination: rewordings caught (higher is better); translations (es/fr/de) apart")
    print(f"{'setting':<36}{'recall':>8}{'transl.':>9}" + "".join(f"{k[:12]:>14}" for k in kinds_r))
    for r in dec:
        rw = r["rewordings_caught"]
        print(f"{r['setting']:<36}{r['rewording_recall']:>8.3f}{_fmt(r['translation_recall']):>9}"
              + "".join(f"{_fmt(rw[k]):>14}" for k in kinds_r))
    near = run_near(pp, sib)
    kinds_p = list(near[0]["paraphrases_caught"])
    print("\nNear dedup: paraphrase pairs caught, template-sibling pairs broken")
    print(f"{'setting':<36}{'recall':>8}" + "".join(f"{k:>10}" for k in kinds_p) + f"{'siblings':>10}{'s/pair':>9}")
    for r in near:
        pc = r["paraphrases_caught"]
        print(f"{r['setting']:<36}{r['paraphrase_recall']:>8.3f}" + "".join(f"{_fmt(pc[k]):>10}" for k in kinds_p)
              + f"{_fmt(r['siblings_broken']):>10}{r['seconds_per_pair']:>9.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"decontam": dec, "near": near}, indent=2))


if __name__ == "__main__":
    main()
