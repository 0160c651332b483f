"""Stage `decontaminate` on chunks of tasks (the batch path,
transforms/batch/dedup.py): the same index and the same per-task judgement
(stage.check_task), one Beam element per chunk instead of per task; tasks
the cheap evidence settles skip the full check (decontam/prefilter.py)."""

from __future__ import annotations

import apache_beam as beam

from tasksieve.transforms.decontam.index import get_index
from tasksieve.transforms.decontam.prefilter import decontaminate_rows
from tasksieve.transforms.batch.chunks import Spill, as_chunk, rows_of, unchanged
from tasksieve.transforms.stage import DROPPED, KEPT, split_kept_dropped


class _DecontaminateChunkFn(beam.DoFn):
    def __init__(self, n, benchmarks, extra_paths, checks, spill):
        self.args = (n, list(benchmarks), list(extra_paths))
        self.checks, self.spill = dict(checks), spill

    def setup(self):
        # Once per worker process: the index is the expensive part.
        self.index = get_index(*self.args, **self.checks)

    def process(self, chunk):
        if not self.index.items:  # no benchmark configured: every task is clean, the chunk passes as it is
            yield KEPT, chunk
            return
        tasks = rows_of(chunk)
        clean, dropped = decontaminate_rows(tasks, self.index)
        if clean and not dropped:
            yield KEPT, unchanged(chunk, tasks, self.spill)  # not pickled again
        elif clean:
            yield KEPT, as_chunk(clean, self.spill)
        if dropped:
            yield DROPPED, as_chunk(dropped, self.spill)


class DecontaminateChunks(beam.PTransform):
    """Chunks of tasks in; (clean chunks, chunks of contaminated tasks) out."""

    def __init__(
        self,
        n: int,
        benchmarks: list[str],
        extra_paths: list[str],
        checks: dict | None = None,
        spill: Spill | None = None,
    ):
        super().__init__()
        self.fn = _DecontaminateChunkFn(n, benchmarks, extra_paths, checks or {}, spill)

    def expand(self, chunks):
        return split_kept_dropped(chunks | "Check" >> beam.ParDo(self.fn), "CheckSplit")
