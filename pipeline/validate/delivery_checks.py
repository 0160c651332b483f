"""The content checks of `tasksieve validate`, Beam-free, built from the
pipeline's own stage functions so a delivery is judged exactly as the
pipeline would treat it.

Every check returns the same shape, which the summary, the report and the
terminal table all print:

    {"name", "description", "observed", "threshold", "status": pass|fail|skipped,
     "offenders": [{"task_id", "where" ("file:line"), "reason", ...evidence}], "details": {...}}
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import sys
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Callable

from tasksieve.schemas.config import VerifyConfig
from tasksieve.transforms.decontam.index import BenchmarkIndex
from tasksieve.transforms.decontam.stage import check_task as decontam_check
from tasksieve.transforms.normalize import with_hash
from tasksieve.transforms.read import read_source
from tasksieve.transforms.validate import first_by_position, validate_row
from tasksieve.transforms.verify.sanity import check_verifier


def where(row: dict) -> str:
    return f"{row['source_file']}:{row['line']}"


def raw_task_id(raw: dict) -> str | None:
    tid = (raw.get("record") or {}).get("task_id")
    return str(tid) if isinstance(tid, (str, int)) and not isinstance(tid, bool) else None


def offender(task_id, loc: str, reason: str, **evidence) -> dict:
    return {"task_id": task_id, "where": loc, "reason": reason, **evidence}


def check(
    name: str, description: str, observed, threshold: str, passed: bool | None, offenders: list[dict], **details
) -> dict:
    status = "skipped" if passed is None else ("pass" if passed else "fail")
    return {
        "name": name,
        "description": description,
        "observed": observed,
        "threshold": threshold,
        "status": status,
        "offenders": offenders,
        "details": details,
    }


def rate(n: int, total: int) -> float:
    return round(n / total, 4) if total else 0.0


# --- reading and the Task contract -------------------------------------------------------

# A contract failure about a date or an amount is reported under that check,
# not under `schema`, so each problem is counted once and named for what it is.
_FIELD_CHECK = {"created_at": "dates", "expert_minutes": "ranges", "expert_cost_usd": "ranges"}
_FIELD = re.compile(r"field '(\w+)'")


def read_delivery(
    paths: list[str], max_row_bytes: int, max_field_chars: int, amount_limits: tuple[float, float] | None = None
) -> tuple[list, list, list]:
    """(raw rows, valid tasks, contract failures). A row that cannot be read
    or breaks the Task contract (validate_row), or repeats a task_id within
    its source, is a failure with its file:line and reason, and the `check`
    it counts towards: exactly the rows `tasksieve run` quarantines. It
    never raises. `amount_limits` = (max expert_minutes, max expert_cost_usd),
    the run's [limits]."""
    raws, tasks, failures = [], [], []
    for path in paths:
        for raw in read_source(path, max_row_bytes):
            raws.append(raw)
            task, reason = validate_row(raw, max_field_chars, *(amount_limits or ()))
            if task is not None:
                tasks.append(task)
                continue
            m = _FIELD.search(reason)
            kind = _FIELD_CHECK.get(m.group(1), "schema") if m and not raw.get("error") else "schema"
            failures.append(
                offender(
                    raw_task_id(raw), where(raw), reason, check=kind, stage="read" if raw.get("error") else "validate"
                )
            )
    # As the pipeline does: a task_id repeated within a source is quarantined
    # after its first occurrence.
    by_id: dict[tuple, list[dict]] = defaultdict(list)
    for t in tasks:
        by_id[(t["source"], t["task_id"])].append(t)
    repeats = set()
    for (source, task_id), group in by_id.items():
        if len(group) < 2:
            continue
        first, rest = first_by_position(group)
        for t in rest:
            repeats.add(id(t))
            failures.append(
                offender(
                    task_id,
                    where(t),
                    f"task_id '{task_id}' repeats within source '{source}' (first at {where(first)})",
                    check="schema",
                    stage="validate",
                )
            )
    return raws, [t for t in tasks if id(t) not in repeats], failures


def read_pool(paths: list[str], max_row_bytes: int, max_field_chars: int) -> tuple[dict, int]:
    """content_hash -> (task_id, file:line) of the buyer's pool, and how many
    pool rows could not be used (they cannot match anything)."""
    hashes, unusable = {}, 0
    for path in paths:
        for raw in read_source(path, max_row_bytes):
            task, _ = validate_row(raw, max_field_chars)
            if task is None:
                unusable += 1
                continue
            t = with_hash(task)
            hashes.setdefault(t["content_hash"], (t["task_id"], where(t)))
    return hashes, unusable


# --- contamination and verifiers ---------------------------------------------------------------


def contamination(tasks: list[dict], index: BenchmarkIndex, benchmarks: list[str], max_n: int) -> dict:
    offenders = []
    for t in tasks:
        dropped = decontam_check(t, index)
        if dropped is not None:
            ev = json.loads(dropped["drop_detail"])
            item = f"{ev['benchmark']} item {ev['benchmark_item']}"
            if ev["check"] == "ngram":
                why = f'shares {ev["n"]} words with {item}: "{ev["ngram"]}"'
            elif ev["check"] == "short_item":
                why = f'contains the whole of {item}: "{ev["matched_text"]}"'
            elif ev["check"] == "fuzzy":
                why = f'rewords {item} ({ev["similarity"]:.0%} of its words in order): "{ev["matched_text"][:200]}"'
            else:
                why = f"means the same as {item} (cosine {ev['cosine']}) and states its quantities"
            if ev.get("confirmed_by"):
                why += f"; confirmed by {ev['confirmed_by'].replace('_', ' ')}"
            offenders.append(offender(t["task_id"], where(t), why, **ev))
    return check(
        "contamination",
        f"tasks that are a benchmark item: found by a shared {index.n}-word n-gram, a "
        "short item, in-order rewording or meaning, and confirmed on numbers, reference answer or code "
        "behaviour "
        f"({', '.join(benchmarks) or 'none'})",
        len(offenders),
        f"<= {max_n}",
        len(offenders) <= max_n,
        offenders,
        benchmark_items=index.items,
    )


# A delivery of at least this many tasks per core has its verifier sanity
# checked in worker processes, one per core the run may use: the answer
# extraction of ~10 probes a task is Python, which threads run on one core
# (~0.4 ms a task), while the math workers and sandboxes are processes already.
SANITY_TASKS_PER_PROCESS = 4_000
SANITY_MAX_PROCESSES = 8


def _sanity_here(tasks: list[dict], progress: Callable[[int], None] | None = None) -> list[dict]:
    """check_verifier of each task, in order, in this process. As the
    pipeline's stage: `parallel` checks at once (math-verify workers and
    sandboxes are processes). `progress` is told the count done."""
    settings = VerifyConfig()
    with ThreadPoolExecutor(max_workers=settings.parallel) as pool:
        verdicts = []
        for verdict in pool.map(lambda t: check_verifier(t, settings), tasks):
            verdicts.append(verdict)
            if progress is not None and (len(verdicts) % 256 == 0 or len(verdicts) == len(tasks)):
                progress(len(verdicts))
    return verdicts


def sanity_processes(n_tasks: int) -> int:
    """Worker processes for the sanity check of `n_tasks` (1: this one)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cores, SANITY_MAX_PROCESSES, n_tasks // SANITY_TASKS_PER_PROCESS))


def sanity_verdicts(
    tasks: list[dict], processes: int | None = None, progress: Callable[[int], None] | None = None
) -> list[dict]:
    """check_verifier of each task, in delivery order: over `processes`
    fresh ("spawn": nothing of this process's state or threads is copied)
    worker processes, in contiguous parts, or here. Each task's verdict is
    its own (the same function, the same default settings), so the split
    changes only the speed. A pool that cannot start or breaks falls back
    to this process. `progress` is told the count done, in order."""
    n = sanity_processes(len(tasks)) if processes is None else processes
    if n > 1:
        size = -(-len(tasks) // (8 * n))  # parts of an eighth of a process's share: an even finish, a steady count
        parts = [tasks[i : i + size] for i in range(0, len(tasks), size)]
        try:
            with ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("spawn")) as pool:
                verdicts = []
                for part in pool.map(_sanity_here, parts):
                    verdicts += part
                    if progress is not None:
                        progress(len(verdicts))
                return verdicts
        except (OSError, BrokenProcessPool) as e:
            print(
                f"verifier sanity: worker processes failed ({type(e).__name__}: {e}); checking here instead",
                file=sys.stderr,
            )
    return _sanity_here(tasks, progress)


def verifier_sanity(
    tasks: list[dict], max_n: int, processes: int | None = None, progress: Callable[[int], None] | None = None
) -> dict:
    offenders, executed = [], 0
    verdicts = sanity_verdicts(tasks, processes, progress)
    for t, verdict in zip(tasks, verdicts):
        executed += int(t["domain"] == "code" and verdict["executed"])
        if verdict["broken"]:
            offenders.append(offender(t["task_id"], where(t), "; ".join(verdict["problems"]), domain=t["domain"]))
    return check(
        "verifier_sanity",
        "tasks whose verifier cannot tell a right answer from a null one or a known hack (code: run in the sandbox)",
        len(offenders),
        f"<= {max_n}",
        len(offenders) <= max_n,
        offenders,
        code_tasks_run_in_sandbox=executed,
    )


# --- field expectations (GX) -----------------------------------------------------------------


def field_checks(
    gx_results: list[dict],
    contract_failures: list[dict],
    raws: list[dict],
    max_failures: int,
    descriptions: dict[str, str],
) -> list[dict]:
    """One check per GX check group (schema, license, ranges, dates): the
    rows failing any of its expectations, plus the contract failures routed
    to it. `observed` counts distinct rows."""
    ids = {where(r): raw_task_id(r) for r in raws}
    out = []
    for name, desc in descriptions.items():
        offenders = [dict(f) for f in contract_failures if f["check"] == name]
        for res in gx_results:
            if res["check"] != name or res["success"]:
                continue
            if res["error"]:
                offenders.append(
                    offender(
                        None,
                        "(whole delivery)",
                        f"{res['why']}: GX could not evaluate it: {res['error']}",
                        expectation=res["expectation"],
                    )
                )
            for ref in res["row_refs"]:
                offenders.append(
                    offender(
                        ids.get(ref),
                        ref,
                        f"expected: {res['why']}",
                        expectation=res["expectation"],
                        column=res["column"],
                    )
                )
        rows = len({o["where"] for o in offenders})
        # A row `tasksieve run` would quarantine fails its check whatever the
        # threshold: the two commands agree on every file.
        quarantined = len({o["where"] for o in offenders if o.get("stage")})
        out.append(
            check(
                name,
                desc,
                rows,
                f"<= {max_failures}",
                rows <= max_failures and not quarantined,
                offenders,
                expectations=[r["why"] for r in gx_results if r["check"] == name],
                rows_run_would_quarantine=quarantined,
            )
        )
    return out


# --- difficulty probe ------------------------------------------------------------------------


def learnable_share(tasks: list[dict], backend, plan, min_share: float, not_probed: int) -> dict:
    """Sample plan.k attempts per task (fixed mode) with the pipeline's
    sampler and verifiers; the share of learnable tasks and what it cost in
    tokens. `tasks` are the ones a verifier can judge and that passed the
    other content checks; `not_probed` counts the rest (for the report)."""
    from tasksieve.transforms.sample.stage import ATTEMPT_TAG, sample_tasks

    name, desc = "learnable_share", f"share of probed tasks that are learnable with {plan.model_id}, k={plan.k}"
    statuses: dict[str, int] = {"learnable": 0, "all_pass": 0, "all_fail": 0}
    prompt_tokens = completion_tokens = attempts = 0
    offenders = []
    for kind, row in sample_tasks(tasks, backend, plan):
        if kind == ATTEMPT_TAG:
            attempts += 1
            prompt_tokens += row["prompt_tokens"] or 0
            completion_tokens += row["completion_tokens"] or 0
            continue
        statuses[row["status"]] = statuses.get(row["status"], 0) + 1
        if row["status"] != "learnable":
            offenders.append(
                offender(
                    row["task_id"],
                    where(row),
                    f"{row['status']}: {row['n_pass']} of {row['n_attempts']} attempts passed",
                    status=row["status"],
                )
            )
    probed = sum(statuses.values())
    shares = {k: rate(v, probed) for k, v in statuses.items()}
    details = dict(
        model_id=plan.model_id,
        k=plan.k,
        probed=probed,
        not_probed=not_probed,
        counts=statuses,
        shares=shares,
        attempts=attempts,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
    )
    if probed == 0:
        return check(name, desc, None, f">= {min_share}", None, [], why="no task could be probed", **details)
    observed = shares["learnable"]
    return check(name, desc, observed, f">= {min_share}", observed >= min_share, offenders, **details)
