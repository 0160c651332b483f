"""Stage `exact_dedup`: one task per content hash survives.

Survivor rule (deterministic, whatever the order rows arrive in): the
earliest `created_at` as an instant (offsets applied; rows without a
date come last), then the alphabetically first `source`, then the first
`task_id`, then the first file position. Every other copy is dropped and names its survivor.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from functools import lru_cache

from tasksieve.schemas.rows import Result, Task
from tasksieve.transforms.stage import drop_record

STAGE = "exact_dedup"


_EPOCH = datetime(1, 1, 1, tzinfo=timezone.utc)
_NEVER = 1 << 62  # after every date a datetime can hold (~3.2e17 us)


@lru_cache(maxsize=1 << 16)
def _instant(created: str) -> int:
    """Microseconds since 0001-01-01 UTC of an ISO 8601 `created_at`
    (validate.py refuses one that does not parse), so the same instant
    written with another offset sorts where it is, not where its text does
    ("10:00+05:00" is before "06:00Z"). No offset: read as UTC. An integer,
    so two instants a microsecond apart never tie."""
    try:
        dt = datetime.fromisoformat(created.replace("Z", "+00:00"))
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=timezone.utc)
        return (dt - _EPOCH) // timedelta(microseconds=1)
    except (ValueError, OverflowError, TypeError):
        return _NEVER


def survivor_key(task: dict) -> tuple:
    created = task.get("created_at")
    instant = _instant(created) if created else 0
    return (created is None, instant, task["source"], task["task_id"], task["source_file"], task["line"])


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
