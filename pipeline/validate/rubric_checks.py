"""`tasksieve validate`: the `rubric` check of a delivery's rubric tasks.

A rubric verdict is only as good as its criteria and its labels:
- every criterion one checkable statement: a compound one ("mentions X and
  explains Y", "... or ...", "...; ...") cannot be rated YES/NO without a
  rule for half-met, and is flagged; so is a criterion repeated in a task;
- graded attempts (transforms/verify/judge/labels.py) present and
  well-formed (malformed ones already fail `schema`: the row is quarantined);
  a task without any is reported (its judge's agreement will be unmeasured)
  but does not fail the check;
- label balance: labels that are all met or all unmet leave kappa undefined
  (nothing tells a reading judge from one that always says the same), a
  failure; a criterion every graded attempt rates alike is reported.
"""

from __future__ import annotations

import json
import re

_COMPOUND = re.compile(r"\b(and|or|and/or|as well as)\b|;", re.I)


def criterion_problems(criteria: list[str]) -> list[str]:
    out, seen = [], {}
    for i, c in enumerate(criteria, 1):
        norm = " ".join(c.lower().split()).rstrip(".")
        if norm in seen:
            out.append(f"criterion {i} repeats criterion {seen[norm]}")
        seen.setdefault(norm, i)
        m = _COMPOUND.search(c)
        if m:
            out.append(f"criterion {i} is compound ({m.group(0).strip()!r}): split it into single checkable statements")
    return out


def label_problems(criteria: list[str], graded: list[dict]) -> tuple[list[str], list[str]]:
    """(failures, notes) about a task's labels."""
    if not graded:
        return [], ["no graded_attempts: the judge's agreement on this task will be unmeasured"]
    flat = [b for g in graded for b in g["criteria_met"]]
    if all(flat) or not any(flat):
        return [f"all {len(flat)} labels are {'met' if all(flat) else 'unmet'}: kappa is undefined"], []
    notes = []
    for i in range(len(criteria)):
        col = [g["criteria_met"][i] for g in graded]
        if all(col) or not any(col):
            notes.append(f"criterion {i + 1}: every graded attempt is {'met' if all(col) else 'unmet'}")
    return [], notes


def rubric_check(tasks: list[dict], check, offender, where) -> dict:
    """The `rubric` check (delivery_checks.check shape); skipped without rubric tasks."""
    rubric = [t for t in tasks if t.get("domain") == "rubric"]
    offenders, failing, labelled, labels = [], 0, 0, 0
    for t in rubric:
        criteria = [c.strip() for c in t.get("rubric") or [] if isinstance(c, str) and c.strip()]
        graded = json.loads(t["graded_attempts"]) if t.get("graded_attempts") else []
        labelled += bool(graded)
        labels += sum(len(g["criteria_met"]) for g in graded)
        bad, notes = label_problems(criteria, graded)
        bad = criterion_problems(criteria) + bad
        failing += bool(bad)
        if bad or notes:
            offenders.append(offender(t["task_id"], where(t), "; ".join(bad + notes), fails=bool(bad)))
    return check(
        "rubric",
        "rubric tasks: each criterion one checkable statement (no compound or repeated ones), "
        "graded attempts present, labels with both met and unmet values",
        failing,
        "== 0",
        None if not rubric else failing == 0,
        offenders,
        rubric_tasks=len(rubric),
        with_graded_attempts=labelled,
        labels=labels,
    )
