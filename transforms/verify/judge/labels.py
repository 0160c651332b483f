"""Calibration labels: responses to a rubric task graded by people.

A rubric task may carry `graded_attempts`: a list of
`{"response": str, "criteria_met": [bool, ...], "grader": str (optional)}`,
one bool per criterion, in the rubric's order. They are checked like any
other field (`parse_graded` raises LabelError with a one-line reason, and
the row is quarantined) and stored on the task as canonical JSON text.
They may also come from a separate file (`--graded FILE`): a JSON object
{task_id: [graded attempt, ...]} or JSONL rows {"task_id": ..., "graded_attempts": [...]}
(`load_graded_file`); a row's own labels win over the file's.
"""

from __future__ import annotations

import json
from pathlib import Path

MAX_GRADED = 200  # graded attempts per task
MAX_GRADER_CHARS = 200
MAX_FILE_BYTES = 200 << 20


class LabelError(ValueError):
    """A graded_attempts value that cannot be used; the message is one line."""


def parse_graded(value, n_criteria: int, max_chars: int = 100_000) -> list[dict] | None:
    """The graded attempts as a list of {response, criteria_met, grader}, or
    None when absent. Raises LabelError naming the first problem."""
    if value is None:
        return None
    if isinstance(value, str):  # Parquet/datasets deliveries may carry it as JSON text
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            raise LabelError("field 'graded_attempts' is text that is not JSON; expected a list of objects") from None
    if not isinstance(value, list):
        raise LabelError(f"field 'graded_attempts' is a {type(value).__name__}, expected a list of objects")
    if len(value) > MAX_GRADED:
        raise LabelError(f"field 'graded_attempts' holds {len(value)} attempts, over the {MAX_GRADED} limit")
    out = []
    for i, g in enumerate(value):
        where = f"graded_attempts[{i}]"
        if not isinstance(g, dict):
            raise LabelError(f"{where} is a {type(g).__name__}, expected an object")
        unknown = sorted(set(map(str, g)) - {"response", "criteria_met", "grader"})
        if unknown:
            raise LabelError(f"{where} has unknown key {unknown[0][:40]!r}; expected response, criteria_met, grader")
        response, met, grader = g.get("response"), g.get("criteria_met"), g.get("grader")
        if not isinstance(response, str):
            raise LabelError(
                f"{where}.response is {'missing' if response is None else 'a ' + type(response).__name__}"
                ", expected text"
            )
        if len(response) > max_chars:
            raise LabelError(f"{where}.response is {len(response)} characters, over the {max_chars}-character limit")
        if not isinstance(met, list) or not all(type(b) is bool for b in met):
            raise LabelError(f"{where}.criteria_met must be a list of true/false, one per criterion")
        if len(met) != n_criteria:
            raise LabelError(f"{where}.criteria_met has {len(met)} values for {n_criteria} criteria")
        if grader is not None and (not isinstance(grader, str) or len(grader) > MAX_GRADER_CHARS):
            raise LabelError(f"{where}.grader must be text of at most {MAX_GRADER_CHARS} characters")
        out.append({"response": response, "criteria_met": list(met), "grader": grader or None})
    return out


def graded_json(graded: list[dict] | None) -> str | None:
    return None if graded is None else json.dumps(graded, ensure_ascii=False, sort_keys=True)


def graded_of(task: dict) -> list[dict]:
    """The task's graded attempts (validated JSON text on the task)."""
    raw = task.get("graded_attempts")
    if not raw:
        return []
    try:
        return json.loads(raw) if isinstance(raw, str) else list(raw)
    except ValueError:
        return []


class GradedFileError(Exception):
    """A --graded file that cannot be used; one line."""


def load_graded_file(path: str | Path) -> dict[str, list]:
    """{task_id: raw graded attempts} from a --graded file. Shapes are
    checked per task when the task's criteria are known (attach_graded)."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise GradedFileError(f"--graded {path}: over {MAX_FILE_BYTES >> 20} MiB")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise GradedFileError(f"--graded {path}: cannot read it: {type(e).__name__}") from None
    try:
        data = json.loads(text)
        if isinstance(data, dict) and "task_id" in data and "graded_attempts" in data:
            rows = [data]  # a JSONL file of one row
        else:
            rows = [{"task_id": k, "graded_attempts": v} for k, v in data.items()] if isinstance(data, dict) else None
    except (ValueError, RecursionError):
        rows = None
    if rows is None:
        rows = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except (ValueError, RecursionError):
                raise GradedFileError(f"--graded {path}: line {n} is not JSON") from None
            if (
                not isinstance(row, dict)
                or not isinstance(row.get("task_id"), (str, int))
                or isinstance(row.get("task_id"), bool)
            ):
                raise GradedFileError(f"--graded {path}: line {n} is not an object with a task_id")
            rows.append(row)
    out: dict[str, list] = {}
    for row in rows:
        tid, graded = str(row.get("task_id")), row.get("graded_attempts")
        if not isinstance(graded, list):
            raise GradedFileError(f"--graded {path}: task {tid[:60]!r}: graded_attempts is not a list")
        out.setdefault(tid, []).extend(graded)
    return out


def attach_graded(task: dict, from_file: dict[str, list] | None) -> tuple[dict, str | None]:
    """(task with the file's labels when it has none of its own, problem).
    A file entry that does not fit the task's criteria is a problem the
    gate reports (the task is dropped, not judged on bad labels)."""
    if not from_file or task.get("graded_attempts") or task.get("task_id") not in from_file:
        return task, None
    n = len([c for c in task.get("rubric") or [] if isinstance(c, str) and c.strip()])
    try:
        graded = parse_graded(from_file[task["task_id"]], n)
    except LabelError as e:
        return task, f"--graded file: {e}"
    return dict(task, graded_attempts=graded_json(graded)), None
