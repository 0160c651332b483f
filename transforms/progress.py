"""Progress lines for long runs, driven by what the stages emit: a pass-through
DoFn counts the rows in the elements it sees (rows or chunks of rows) and
prints rows, rows/s and, when the input's row count is known, an ETA.

Why not runner metrics: the DaskRunner has none, and the in-process runner
only reports them at the end. A step's rate runs from its first element;
one whose elements came in a single burst is rated over the run so far.
Each worker process prints its own line (on N workers the rates add up);
at most one line per `every_s` seconds.
"""

from __future__ import annotations

import sys
import time

import apache_beam as beam


def progress_line(label: str, seen: int, elapsed: float, total: int | None, unit: str = "rows") -> str:
    rate = seen / elapsed if elapsed > 0 else 0.0
    line = f"  {label}: {seen:,} {unit}, {rate:,.{0 if unit in ('rows', 'tasks') else 1}f} {unit}/s"
    if total:
        done = min(seen / total, 1.0)
        bar = "#" * int(20 * done)
        line = f"  [{bar:<20}] {100 * done:3.0f}% {line.strip()}"
        if rate > 0 and seen < total:
            line += f", ETA {(total - seen) / rate:,.0f}s"
    return line


class Ticker:
    """Progress lines for plain Python (`tasksieve validate`, no Beam):
    call it with the count done so far; it prints at most one line per
    `every_s` seconds, and `done()` the last one."""

    def __init__(self, label: str, total: int | None = None, every_s: float = 2.0, unit: str = "rows"):
        self.label, self.total, self.every_s, self.unit = label, total, every_s, unit
        self.t0 = self.last = time.time()
        self.seen = 0

    def __call__(self, seen: int) -> None:
        self.seen, now = seen, time.time()
        if now - self.last >= self.every_s:
            self.last = now
            print(progress_line(self.label, seen, now - self.t0, self.total, self.unit), file=sys.stderr, flush=True)

    def done(self) -> None:
        print(
            progress_line(self.label + " (done)", self.seen, time.time() - self.t0, None, self.unit),
            file=sys.stderr,
            flush=True,
        )


class Progress(beam.DoFn):
    """Passes elements on unchanged. Each element counts as: its length
    (`chunks`, a stage.as_chunk: its row count first), itself (`count`, an int of rows), or one row.
    `unit` names what is counted: the steps between reading and the end of
    dedup count the shards they have finished ("shards", of a known total)."""

    def __init__(
        self,
        label: str,
        total: int | None = None,
        chunks: bool = True,
        every_s: float = 2.0,
        count: bool = False,
        unit: str = "rows",
    ):
        self.label, self.total, self.chunks, self.every_s, self.count = label, total, chunks, every_s, count
        self.unit = unit
        self.built = time.time()  # when the graph was built (wall clock: the same on every worker)

    def setup(self):
        self.seen, self.t0, self.last, self.latest = 0, None, 0.0, None

    def process(self, element):
        now = time.time()
        if self.t0 is None:
            self.t0 = self.last = now
        self.latest = now
        self.seen += element if self.count else element[0] if self.chunks else 1
        if now - self.last >= self.every_s:
            self.last = now
            print(
                progress_line(self.label, self.seen, now - self.t0, self.total, self.unit), file=sys.stderr, flush=True
            )
        yield element

    def teardown(self):
        if self.seen and self.latest is not None:
            # The rate up to the last element, not to teardown (which comes
            # when the whole pipeline ends). A step whose elements came in
            # one burst (the kept rows, all at once when near dedup has
            # decided) has no pace of its own: from its first element it
            # showed millions of rows/s; it is rated over the run so far.
            elapsed = self.latest - self.t0
            if elapsed < self.every_s:
                elapsed = self.latest - self.built
            print(
                progress_line(self.label + " (done)", self.seen, elapsed, None, self.unit), file=sys.stderr, flush=True
            )
