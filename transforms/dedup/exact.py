"""Stage `exact_dedup`: one task per content hash survives.

Survivor rule (deterministic, whatever the order rows arrive in): the
earliest `created_at` (rows without a date come last), then the
alphabetically first `source`, then the first `task_id`, then the first
file position. Every other copy is dropped and names its survivor.
"""

from __future__ import annotations

from tasksieve.schemas.rows import Result, Task
from tasksieve.transforms.stage import drop_record

STAGE = "exact_dedup"


def survivor_key(task: dict) -> tuple:
    created = task.get("created_at")
    return (created is None, created or "", task["source"], task["task_id"], task["source_file"], task["line"])


def pick_survivor(tasks: list[Task]) -> tuple[Task, list[Result]]:
    """(survivor, dropped-with-reason) for tasks that share one content hash."""
    ordered = sorted(tasks, key=survivor_key)
    keep = ordered[0]
    evidence = {
        "duplicate_of": keep["task_id"],
        "duplicate_of_source": keep["source"],
        "content_hash": keep["content_hash"],
    }
    dropped = [drop_record(t, STAGE, "exact_duplicate", evidence) for t in ordered[1:]]
    return keep, dropped
