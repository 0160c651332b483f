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

import apache_beam as beam

from tasksieve.schemas.rows import Result, Task
from tasksieve.transforms.decontam.index import BenchmarkIndex, get_index, index_spec
from tasksieve.transforms.stage import DROPPED, KEPT, drop_record, split_kept_dropped

STAGE = "decontaminate"


REASONS = {
    "ngram": "benchmark_ngram_overlap",
    "short_item": "benchmark_short_item",
    "fuzzy": "benchmark_fuzzy_match",
    "semantic": "benchmark_semantic_match",
}


def check_task(task: Task, index: BenchmarkIndex) -> Result | None:
    """The task marked dropped with evidence, or None if it is clean."""
    evidence = index.judge(task)
    if evidence is None:
        return None
    return drop_record(task, STAGE, REASONS[evidence["check"]], evidence)


class _DecontaminateFn(beam.DoFn):
    def __init__(self, n, benchmarks, extra_paths, checks):
        self.args = (n, list(benchmarks), list(extra_paths))
        self.checks = dict(checks)

    def setup(self):
        self.index = get_index(*self.args, **self.checks)

    def process(self, task):
        dropped = check_task(task, self.index)
        yield (KEPT, task) if dropped is None else (DROPPED, dropped)


class Decontaminate(beam.PTransform):
    """Tasks in; (clean tasks, contaminated ones) out."""

    def __init__(self, n: int, benchmarks: list[str], extra_paths: list[str], checks: dict | None = None):
        super().__init__()
        self.fn = _DecontaminateFn(n, benchmarks, extra_paths, checks or {})

    @classmethod
    def from_config(cls, decontam) -> "Decontaminate":
        """From the run config's `[decontam]` section."""
        return cls(*index_spec(decontam))

    def expand(self, tasks):
        return split_kept_dropped(tasks | "Check" >> beam.ParDo(self.fn), "CheckSplit")
