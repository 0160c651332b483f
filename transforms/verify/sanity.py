"""Stage `verifier_sanity`: can this task's verifier tell a right answer
from a wrong one, and does it refuse the known reward hacks? Checked once
per task, before anything is sampled.

A task with a broken verifier is worse than no task: it rewards nothing (the
reference fails against itself) or rewards anything (an empty answer, a
sprayed list of numbers, an object whose == is always true: a reward hack
the trainer will find). Per domain:

- math / exact: the reference, written as the model is asked to write it
  (`\\boxed{answer}`), must pass; every probe of `hack_probes.answer_probes`
  must fail. An `exact` reference given as /regex/ must compile; it cannot
  be checked against itself, so only the probes are tried.
- code: `tests` and `reference_solution` must compile and the solution must
  define `entry_point`; then, in the sandbox, the reference must pass the
  tests and every probe of `hack_probes.code_probes` must fail them. Without
  a usable sandbox the task is dropped with `no_safe_sandbox`.
- rubric: at least one non-empty criterion (judging costs money: no judge
  call here).

Each problem has a reason code (`null_answer_passes` for a probe that knows
nothing, `hack_probe_passes` for one that games the check, each naming the
probe); the first is the task's `drop_reason` and all of them go into
`drop_detail`. `check_verifier` is Beam-free (the vendor validator calls
it too); `VerifierSanity` is the pipeline stage.
"""

from __future__ import annotations

import ast
import contextlib
import re
from concurrent.futures import ThreadPoolExecutor

import apache_beam as beam

from tasksieve.schemas.config import VerifyConfig
from tasksieve.transforms.verify import math_answers as vm
from tasksieve.transforms.verify.sandbox import runner as sandbox
from tasksieve.transforms.stage import DROPPED, KEPT, drop_record, split_kept_dropped
from tasksieve.transforms.verify.hack_probes import Probe, answer_probes, code_probes
from tasksieve.transforms.verify.verifiers import code_case, compile_error, is_regex_reference, limits_of, verify_one

STAGE = "verifier_sanity"


def _probe_problem(probe: Probe) -> tuple[str, str]:
    code = "null_answer_passes" if probe.kind == "null" else "hack_probe_passes"
    return code, f"probe {probe.name!r} passes the verifier: {probe.what}"


def _check_answer_domain(task: dict, settings: VerifyConfig) -> list[tuple[str, str]]:
    answer = (task.get("answer") or "").strip()
    if not answer:
        return [("no_reference", "no reference answer")]
    problems, regex = [], task["domain"] == "exact" and is_regex_reference(answer)
    if regex:
        try:
            re.compile(answer[1:-1])
        except re.error as e:
            return [("bad_reference", f"reference regex does not compile: {e}")]
    own_text, probes = f"The answer is \\boxed{{{answer}}}", answer_probes(task)
    # Math: every answer the checks below will ask the worker about, asked
    # in one batch first (the same answers, without ~15 round trips).
    ahead = (
        vm.answered_ahead(
            task["answer"], [own_text] + [p.text for p in probes], task.get("prompt") or "", settings.math_timeout_s
        )
        if task["domain"] == "math"
        else contextlib.nullcontext()
    )
    with ahead:
        if not regex:
            own = verify_one(task, own_text, settings)
            if not own["passed"]:
                why = f" ({own['error']})" if own.get("error") else ""
                problems.append(
                    ("reference_fails", f"the reference answer {answer[:60]!r} does not verify against itself{why}")
                )
        for probe in probes:
            if verify_one(task, probe.text, settings)["passed"]:
                problems.append(_probe_problem(probe))
    return problems


def _check_code(task: dict, settings: VerifyConfig) -> tuple[list[tuple[str, str]], bool]:
    """(problems, executed)."""
    problems = []
    entry = (task.get("entry_point") or "").strip()
    if not entry.isidentifier():
        problems.append(("bad_entry_point", f"entry_point {entry[:40]!r} is not a Python identifier"))
    tests = task.get("tests") or ""
    if not tests.strip():
        problems.append(("no_tests", "no tests"))
    else:
        err = compile_error(tests, "tests")
        if err:
            problems.append(("tests_do_not_compile", f"tests do not compile: {err.split(': ', 1)[-1]}"))
    solution = task.get("reference_solution")
    if solution is None or not solution.strip():
        problems.append(("no_reference", "no reference_solution: the tests cannot be shown to pass"))
    else:
        err = compile_error(solution, "reference_solution")
        if err:
            problems.append(
                ("reference_does_not_compile", f"reference_solution does not compile: {err.split(': ', 1)[-1]}")
            )
        elif entry.isidentifier():
            tree = ast.parse(solution)
            defined = {
                n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            }
            if entry not in defined:
                problems.append(("bad_entry_point", f"reference_solution does not define entry_point {entry!r}"))
    if problems and any(code in ("bad_entry_point", "no_tests", "tests_do_not_compile") for code, _ in problems):
        return problems, False  # nothing meaningful to run
    limits = limits_of(settings)
    try:
        if not problems:
            ref = sandbox.run_cases([code_case(task, solution)], limits, settings.sandbox).results[0]
            if not ref.passed:
                problems.append(("reference_fails", f"the reference solution fails its own tests: {ref.error}"))
        probes = code_probes(task)
        run = sandbox.run_cases([code_case(task, p.text) for p in probes], limits, settings.sandbox)
    except sandbox.NoSafeSandbox as e:
        return problems + [("no_safe_sandbox", f"no sandbox can run this task's tests safely here: {e}")], False
    problems += [_probe_problem(p) for p, res in zip(probes, run.results) if res.passed]
    return problems, True


def _check_rubric(task: dict) -> list[tuple[str, str]]:
    criteria = [c for c in (task.get("rubric") or []) if isinstance(c, str) and c.strip()]
    return [] if criteria else [("no_criteria", "rubric has no non-empty criterion")]


def check_verifier(task: dict, settings: VerifyConfig | None = None) -> dict:
    """{"broken", "problems" (text), "reasons" (codes), "executed"} for a
    valid task (the output of validate_row). `executed`: whether any
    verifier or test actually ran. Never raises."""
    settings = settings or VerifyConfig()
    domain = task["domain"]
    executed = False
    try:
        if domain in ("math", "exact"):
            found, executed = _check_answer_domain(task, settings), True
        elif domain == "code":
            found, executed = _check_code(task, settings)
        elif domain == "rubric":
            found = _check_rubric(task)
        else:
            found = [("no_verifier", f"no sanity check for domain {domain!r}")]
    except Exception as e:  # the check itself failed: the task cannot be trusted
        found = [("sanity_check_failed", f"the sanity check crashed: {type(e).__name__}: {e}"[:300])]
    return {
        "broken": bool(found),
        "problems": [p for _, p in found],
        "reasons": [c for c, _ in found],
        "executed": executed,
    }


def sanity_route(task: dict, settings: VerifyConfig) -> tuple[str, dict]:
    """(KEPT, task) or (DROPPED, task marked dropped at this stage)."""
    verdict = check_verifier(task, settings)
    if not verdict["broken"]:
        return KEPT, task
    detail = {
        "domain": task["domain"],
        "problems": verdict["problems"],
        "reasons": verdict["reasons"],
        "executed": verdict["executed"],
    }
    return DROPPED, drop_record(task, STAGE, verdict["reasons"][0], detail, sort_keys=False)


class VerifierSanity(beam.PTransform):
    """Tasks in; (tasks whose verifier works, dropped tasks) out. Tasks are
    checked in `groups` keyed groups, `settings.parallel` at a time inside
    each (code checks are sandboxed processes)."""

    def __init__(self, settings: VerifyConfig, groups: int = 1):
        super().__init__()
        self.settings = settings
        self.groups = groups

    def expand(self, tasks):
        settings, groups = self.settings, self.groups

        def check_group(kv):
            _, members = kv
            members = sorted(members, key=lambda t: t["content_hash"])
            with ThreadPoolExecutor(max_workers=settings.parallel) as pool:
                yield from pool.map(lambda t: sanity_route(t, settings), members)

        routed = (
            tasks
            | "KeyByGroup" >> beam.Map(lambda t: (int(t["content_hash"][:8], 16) % groups, t))
            | "Group" >> beam.GroupByKey()
            | "Check" >> beam.FlatMap(check_group)
        )
        return split_kept_dropped(routed, "SanitySplit")
