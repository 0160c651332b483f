"""Stage `decontaminate`: drop tasks that share a long word n-gram with a
public benchmark, so no evaluation item leaks into training.

The index holds hashed word n-grams of every benchmark question (and of the
worked answers where a benchmark ships them). Text is normalised exactly as
for hashing, then split into words; a task whose prompt contains any indexed
n-gram is dropped, and `drop_detail` names the benchmark, the item and the
matching words.

The benchmarks are in benchmarks.py, the index in index.py.
"""

from __future__ import annotations

from tasksieve.schemas.rows import Result, Task
from tasksieve.transforms.decontam.index import BenchmarkIndex, Probe
from tasksieve.transforms.stage import drop_record

STAGE = "decontaminate"


REASONS = {
    "ngram": "benchmark_ngram_overlap",
    "short_item": "benchmark_short_item",
    "fuzzy": "benchmark_fuzzy_match",
    "semantic": "benchmark_semantic_match",
    "answer_quantities": "benchmark_answer_match",
}


def check_task(task: Task, index: BenchmarkIndex, probe: Probe | None = None) -> Result | None:
    """The task marked dropped with evidence, or None if it is clean.
    `probe`: the task's (BenchmarkIndex.probe_of), if already computed."""
    evidence = index.judge(task, probe)
    if evidence is None:
        return None
    return drop_record(task, STAGE, REASONS[evidence["check"]], evidence)
