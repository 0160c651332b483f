"""Stage `decontaminate` on chunks of tasks (the batch path,
transforms/dedup/batch.py): the same index and the same per-task judgement
(stage.check_task), one Beam element per chunk instead of per task."""

from __future__ import annotations

import apache_beam as beam

from tasksieve.transforms.decontam.stage import CLEAN_TAG, DROPPED_TAG, check_task, get_index
from tasksieve.transforms.stage import split_tagged


class _DecontaminateChunkFn(beam.DoFn):
    def __init__(self, n, benchmarks, extra_paths, checks):
        self.args = (n, list(benchmarks), list(extra_paths))
        self.checks = dict(checks)

    def setup(self):
        # Once per worker process, as the row path's DoFn: the index is the expensive part.
        self.index = get_index(*self.args, **self.checks)

    def process(self, tasks):
        clean = []
        for task in tasks:
            dropped = check_task(task, self.index)
            if dropped is None:
                clean.append(task)
            else:
                yield DROPPED_TAG, dropped
        if clean:
            yield CLEAN_TAG, clean


class DecontaminateChunks(beam.PTransform):
    """Chunks of tasks in; (clean chunks, contaminated tasks) out."""

    def __init__(self, n: int, benchmarks: list[str], extra_paths: list[str], checks: dict | None = None):
        super().__init__()
        self.fn = _DecontaminateChunkFn(n, benchmarks, extra_paths, checks or {})

    def expand(self, chunks):
        out = split_tagged(chunks | "Check" >> beam.ParDo(self.fn), "CheckSplit", (CLEAN_TAG, DROPPED_TAG))
        return out[CLEAN_TAG], out[DROPPED_TAG]
