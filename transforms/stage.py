"""The stage contract: what every stage of the funnel shares.

A stage is a Beam-free function over plain dicts (callable from a REPL or a
test) under a thin PTransform that returns (kept, dropped). A dropped task
is the task itself plus `drop_stage`, `drop_reason` and `drop_detail`
(JSON evidence), made by `drop_record`, so every stage's evidence reads
the same way in the `drops` table.

Splitting one PCollection into several, portably: stages emit (tag,
element) pairs and `split_tagged` fans them out with one filter per tag.
Beam's multi-output ParDo (`with_outputs`/`TaggedOutput`) would be the
idiom, but not every runner honours it: Beam 2.77's DaskRunner hands every
output of such a ParDo to every consumer (checked: a two-tag FlatMap
delivered all elements to the tagged consumer). A tag carried in the
element means the same thing on every runner.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import apache_beam as beam

from tasksieve.schemas.rows import Result, Task

KEPT = "kept"
DROPPED = "dropped"


def drop_record(task: Task, stage: str, reason: str, detail: dict, sort_keys: bool = True) -> Result:
    """The task, dropped by `stage` for `reason`, with `detail` as its JSON
    evidence (non-ASCII kept readable). `sort_keys=False` keeps the order
    the stage wrote its evidence in (verifier sanity lists what it checked
    in the order it checked it)."""
    return dict(
        task,
        drop_stage=stage,
        drop_reason=reason,
        drop_detail=json.dumps(detail, sort_keys=sort_keys, ensure_ascii=False),
    )


def _select(tagged, tag):
    if tagged[0] == tag:
        yield tagged[1]


def split_tagged(tagged_pcoll, label: str, tags: tuple[str, ...]) -> dict:
    """{tag: PCollection of the elements carrying that tag}."""
    return {tag: tagged_pcoll | f"{label}[{tag}]" >> beam.FlatMap(_select, tag) for tag in tags}


def split_kept_dropped(tagged_pcoll, label: str) -> tuple:
    """(kept, dropped) of a PCollection of (KEPT | DROPPED, task) pairs."""
    out = split_tagged(tagged_pcoll, label, (KEPT, DROPPED))
    return out[KEPT], out[DROPPED]


def write_count(n: int, path: str) -> str:
    """A count (rows counted, rows read) written to `path` through a
    temporary file and a rename: a retry replaces it, a reader never sees
    half of it. The run's output step reads these files back."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_text(str(n))
    os.replace(tmp, target)
    return str(target)
