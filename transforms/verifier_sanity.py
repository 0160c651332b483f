"""Verifier sanity: can this task's verifier tell a right answer from a
wrong one at all? Checked once per task, before anything is sampled.

A task with a broken verifier is worse than no task: it rewards nothing (the
reference fails against itself) or rewards anything (an empty answer, "I
don't know" or an echo of the prompt passes: a reward hack waiting to be
found). Per domain:

- math / exact: the reference, written as the model is asked to write it
  (`\\boxed{answer}`), must pass; the null answers must fail. An `exact`
  reference given as /regex/ must compile; it cannot be checked against
  itself, so only the null answers are tried.
- code: `tests` and `reference_solution` must compile and the solution must
  define `entry_point`. Nothing is executed: running vendor code needs the
  sandbox, which arrives with the code verifier in a later issue.
- rubric: at least one non-empty criterion.

Beam-free and side-effect free, so the pipeline can call it as a stage later.
"""

from __future__ import annotations

import ast
import re

from tasksieve.transforms.verifiers import verifier_for

NULL_ANSWERS = ("", "I don't know.")


def _null_completions(task: dict) -> list[tuple[str, str]]:
    return [("empty answer", NULL_ANSWERS[0]), ("'I don't know'", NULL_ANSWERS[1]),
            ("an echo of the prompt", task.get("prompt") or "")]


def _check_answer_domain(task: dict) -> list[str]:
    verify = verifier_for(task["domain"])
    answer = (task.get("answer") or "").strip()
    if not answer:
        return ["no reference answer"]
    problems = []
    is_regex = task["domain"] == "exact" and len(answer) > 2 and answer.startswith("/") and answer.endswith("/")
    if is_regex:
        try:
            re.compile(answer[1:-1])
        except re.error as e:
            return [f"reference regex does not compile: {e}"]
    else:
        own = verify(task, f"The answer is \\boxed{{{answer}}}")
        if not own["passed"]:
            why = f" ({own['error']})" if own.get("error") else ""
            problems.append(f"the reference answer {answer[:60]!r} does not verify against itself{why}")
    for label, completion in _null_completions(task):
        if verify(task, completion)["passed"]:
            problems.append(f"{label} passes the verifier")
    return problems


def _compiles(label: str, source: str) -> tuple[ast.Module | None, str | None]:
    try:
        # compile() only: the code is parsed and byte-compiled, never run.
        compile(source, f"<{label}>", "exec")
        return ast.parse(source), None
    except (SyntaxError, ValueError) as e:
        where = f" (line {e.lineno})" if getattr(e, "lineno", None) else ""
        return None, f"{label} does not compile: {getattr(e, 'msg', e)}{where}"


def _check_code(task: dict) -> list[str]:
    problems = []
    entry = (task.get("entry_point") or "").strip()
    if not entry.isidentifier():
        problems.append(f"entry_point {entry[:40]!r} is not a Python identifier")
    tests = task.get("tests") or ""
    if not tests.strip():
        problems.append("no tests")
    else:
        _, err = _compiles("tests", tests)
        if err:
            problems.append(err)
    solution = task.get("reference_solution")
    if solution is None or not solution.strip():
        problems.append("no reference_solution: the tests cannot be shown to pass")
    else:
        tree, err = _compiles("reference_solution", solution)
        if err:
            problems.append(err)
        elif entry.isidentifier():
            defined = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
            if entry not in defined:
                problems.append(f"reference_solution does not define entry_point {entry!r}")
    return problems


def _check_rubric(task: dict) -> list[str]:
    criteria = [c for c in (task.get("rubric") or []) if isinstance(c, str) and c.strip()]
    return [] if criteria else ["rubric has no non-empty criterion"]


def check_verifier(task: dict) -> dict:
    """{"broken": bool, "problems": [...], "executed": bool} for a valid task
    (the output of validate_row). `executed` says whether any verifier ran
    (code tasks are only compiled)."""
    domain = task["domain"]
    if domain in ("math", "exact"):
        problems, executed = _check_answer_domain(task), True
    elif domain == "code":
        problems, executed = _check_code(task), False
    elif domain == "rubric":
        problems, executed = _check_rubric(task), False
    else:
        problems, executed = [f"no sanity check for domain {domain!r}"], False
    return {"broken": bool(problems), "problems": problems, "executed": executed}
