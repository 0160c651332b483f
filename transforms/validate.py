"""Stage `validate`: a raw row becomes a Task, or a quarantine entry with a
reason a person can act on.

Lenient where intent is clear (an integer task_id or a numeric answer is
turned into a string; a missing source or batch is named after the file),
strict where a guess could corrupt training data or money (unknown domain,
missing reference answer, negative or non-numeric cost).
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from datetime import datetime
from pathlib import Path

from tasksieve.schemas.records import DOMAINS, REQUIRED_BY_DOMAIN, TASK_SCHEMA, declared_domain  # noqa: F401
from tasksieve.transforms.read import RAW_KEEP_CHARS, RowLimitError, cap, check_value, loads_limited
from tasksieve.transforms.verify.judge.labels import LabelError, graded_json, parse_graded

_TEXT_FIELDS = (
    "task_id",
    "source",
    "batch_id",
    "prompt",
    "answer",
    "tests",
    "entry_point",
    "reference_solution",
    "license",
    "created_at",
)
_KNOWN = set(TASK_SCHEMA.names) - {"content_hash", "source_file", "line"}

# Defaults of [limits] max_expert_minutes / max_expert_cost_usd: above them a
# value is absurd (a typo, a unit mix-up, an attack on the totals), not a price.
MAX_EXPERT_MINUTES = 100_000.0
MAX_EXPERT_COST_USD = 1_000_000.0
# task_id and source as shown in a quarantine row, whatever their length.
MAX_ID_CHARS = 200


class RowError(ValueError):
    pass


def _show(value, limit: int = 40) -> str:
    """A value as a reason may quote it: short, never a copy of attacker text."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"a {value.bit_length() * 3 // 10}-digit integer"
    try:
        text = repr(value)
    except Exception:
        text = f"a {type(value).__name__}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _as_text(name: str, value, max_chars: int) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise RowError(f"field '{name}' is a boolean, expected text")
    if isinstance(value, int) or (isinstance(value, float) and math.isfinite(value)):
        # An id or an answer written as a number: its text form is unambiguous.
        if name in ("task_id", "answer", "batch_id"):
            value = str(value)
        else:
            raise RowError(f"field '{name}' is a number, expected text")
    if not isinstance(value, str):
        raise RowError(f"field '{name}' is a {type(value).__name__}, expected text")
    if len(value) > max_chars:
        raise RowError(f"field '{name}' is {len(value)} characters, over the {max_chars}-character limit")
    return value


def _as_amount(name: str, value, limit: float) -> float | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise RowError(f"field '{name}' is a boolean, expected a non-negative number")
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except (ValueError, OverflowError):
            raise RowError(f"field '{name}' is {_show(value)}, expected a non-negative number") from None
    if not isinstance(value, (int, float)):
        raise RowError(f"field '{name}' is a {type(value).__name__}, expected a non-negative number")
    bound = f"the limits.max_{name} limit of {limit:,.0f}" if limit < 1e15 else f"the limits.max_{name} limit"
    try:
        number = float(value)
    except OverflowError:  # an integer beyond any float
        raise RowError(f"field '{name}' is {_show(value)}, over {bound}") from None
    if not math.isfinite(number):
        raise RowError(f"field '{name}' is {_show(value)}, expected a finite non-negative number within {bound}")
    if number < 0:
        raise RowError(f"field '{name}' is negative ({_show(number)}); expected a non-negative number")
    if number > limit:
        raise RowError(f"field '{name}' is {_show(number)}, over {bound}")
    return number


def _as_rubric(value, max_chars: int) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(c, str) for c in value):
        raise RowError("field 'rubric' must be a list of criteria (strings)")
    if sum(len(c) for c in value) > max_chars:
        raise RowError(f"field 'rubric' is over the {max_chars}-character limit")
    return value


def _graded(value, domain: str, rubric: list[str] | None, max_chars: int) -> str | None:
    """Rubric calibration labels (transforms/verify/judge/labels.py), one
    bool per non-empty criterion, as canonical JSON text."""
    if value is None:
        return None
    if domain != "rubric":
        raise RowError(f"field 'graded_attempts' is only for rubric tasks, not {domain}")
    n = len([c for c in rubric or [] if c.strip()])
    try:
        return graded_json(parse_graded(value, n, max_chars))
    except LabelError as e:
        raise RowError(str(e)) from None


def validate_row(
    raw: dict,
    max_field_chars: int,
    max_expert_minutes: float = MAX_EXPERT_MINUTES,
    max_expert_cost_usd: float = MAX_EXPERT_COST_USD,
) -> tuple[dict | None, str | None]:
    """(task, None) for a usable row, (None, reason) for one to quarantine.
    Never raises: whatever a row holds, the answer is a task or a reason."""
    try:
        if raw.get("error"):
            return None, cap(raw["error"])
        task, reason = _validate(raw, max_field_chars, max_expert_minutes, max_expert_cost_usd)
    except Exception as e:  # a value no check foresaw: quarantined, never a crash
        return None, cap(f"row cannot be validated: {type(e).__name__}: {cap(str(e), 100)}")
    return task, None if reason is None else cap(reason)


def _meta(value, max_field_chars: int):
    """`meta` as an object (or None): given as an object, or as JSON text
    parsed under the row limits; other text is kept as {"text": ...}."""
    if isinstance(value, str):
        if not value.strip():
            return None
        if len(value) > max_field_chars:
            raise RowError(f"field 'meta' is {len(value)} characters, over the {max_field_chars}-character limit")
        try:
            return loads_limited(value, "meta")
        except json.JSONDecodeError:
            return {"text": value}
    return value


def _validate(raw: dict, max_field_chars: int, max_minutes: float, max_cost: float) -> tuple[dict | None, str | None]:
    rec = raw["record"]
    if not isinstance(rec, dict):
        return None, f"row is a {type(rec).__name__}, expected an object"
    try:
        check_value(rec)  # the reader checked; a row from elsewhere is checked here
        task = {name: _as_text(name, rec.get(name), max_field_chars) for name in _TEXT_FIELDS}
        prompt = task["prompt"]
        if prompt is None or not prompt.strip():
            raise RowError("field 'prompt' is missing or empty")
        if task["task_id"] is None or not task["task_id"].strip():
            raise RowError("field 'task_id' is missing or empty")
        domain = declared_domain(rec)
        if domain not in DOMAINS:
            raise RowError(f"field 'domain' is {_show(domain)}; expected one of {', '.join(DOMAINS)}")
        task["domain"] = domain
        task["rubric"] = _as_rubric(rec.get("rubric"), max_field_chars)
        task["graded_attempts"] = _graded(rec.get("graded_attempts"), domain, task["rubric"], max_field_chars)
        for need in REQUIRED_BY_DOMAIN[domain]:
            v = task.get(need)
            if v is None or (isinstance(v, str) and not v.strip()) or v == []:
                raise RowError(f"{domain} task has no '{need}'; it cannot be verified")
        task["expert_minutes"] = _as_amount("expert_minutes", rec.get("expert_minutes"), max_minutes)
        task["expert_cost_usd"] = _as_amount("expert_cost_usd", rec.get("expert_cost_usd"), max_cost)
        if task["created_at"] is not None:
            try:
                datetime.fromisoformat(task["created_at"].replace("Z", "+00:00"))
            except (ValueError, OverflowError):
                raise RowError(
                    f"field 'created_at' is {_show(task['created_at'])}, expected an ISO 8601 date"
                ) from None
        meta = _meta(rec.get("meta"), max_field_chars)
        if meta is not None and not isinstance(meta, dict):
            raise RowError(f"field 'meta' is a {type(meta).__name__}, expected an object")
        # Unknown columns are kept, not lost: vendors add their own.
        extra = {k: v for k, v in rec.items() if k not in _KNOWN}
        if extra:
            meta = dict(meta or {}, extra=extra)
        try:
            meta_json = (
                json.dumps(meta, sort_keys=True, default=str, ensure_ascii=False, allow_nan=False) if meta else None
            )
        except ValueError:
            raise RowError(
                "field 'meta' holds a non-finite number (NaN or Infinity), which JSON cannot store"
            ) from None
        except TypeError:  # keys of mixed types cannot be sorted
            raise RowError("field 'meta' has keys that are not text") from None
        if meta_json and len(meta_json) > max_field_chars:
            raise RowError(f"field 'meta' is over the {max_field_chars}-character limit")
        task["meta"] = meta_json
    except (RowError, RowLimitError) as e:
        return None, str(e)
    # A delivery without source/batch columns is named after its file.
    stem = _file_stem(raw["source_file"])
    task["source"] = task["source"] or stem
    task["batch_id"] = task["batch_id"] or stem
    task["source_file"] = raw["source_file"]
    task["line"] = raw["line"]
    task["content_hash"] = None
    return task, None


@lru_cache(maxsize=1024)  # one per input file: Path() per row was 1 s per 100k rows
def _file_stem(source_file: str) -> str:
    return Path(source_file.split("#")[0]).stem


def _id_text(value) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return None
    if isinstance(value, int):
        return str(value) if value.bit_length() <= 128 else None
    return value[:MAX_ID_CHARS]


def quarantine_row(raw: dict, reason: str) -> dict:
    rec = raw.get("record")
    rec = rec if isinstance(rec, dict) else {}
    src = _id_text(rec.get("source"))
    return {
        # Named like valid rows (the file stem when absent), so per-source
        # figures count a vendor's broken rows too.
        "source": src if src and src.strip() else _file_stem(raw["source_file"]),
        "source_file": raw["source_file"],
        "line": raw["line"],
        "task_id": _id_text(rec.get("task_id")),
        # A row that never parsed failed at `read`; one that parsed but broke
        # the contract failed at `validate`.
        "stage": "read" if raw.get("error") else "validate",
        "reason": cap(reason),
        "raw": (raw.get("raw") or "")[:RAW_KEEP_CHARS],
    }


def first_by_position(tasks: list[dict]) -> tuple[dict, list[dict]]:
    """Of rows sharing (source, task_id), the first in the delivery wins."""
    if len(tasks) == 1:  # most ids: nothing to order
        return tasks[0], []
    ordered = sorted(tasks, key=lambda t: (t["source_file"], t["line"]))
    return ordered[0], ordered[1:]


def repeat_entry(first: dict, t: dict) -> dict:
    """Quarantine entry of `t`, a later row with `first`'s (source, task_id);
    written by the batch engine (transforms/batch/dedup.py)."""
    source, task_id = first["source"], first["task_id"]
    return {
        "source": source,
        "source_file": t["source_file"],
        "line": t["line"],
        "task_id": task_id,
        "stage": "validate",
        "reason": f"task_id '{task_id}' repeats within source '{source}' "
        f"(first at {first['source_file']}:{first['line']})",
        "raw": json.dumps({k: t[k] for k in ("task_id", "source", "prompt")}, ensure_ascii=False)[:2000],
    }
