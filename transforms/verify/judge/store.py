"""The gate's records: staged as files by the sampling workers, turned at
the end of the run into the DuckDB table `judge_agreement`, cost rows for
the judge's calibration and probe calls, and the summary's judge line.

`judge_agreement` (one row per task and per criterion of a task with
labels, and pooled rows with task_id NULL):
  run_id, scope ('task' | 'criterion' | 'source' | 'grader' | 'rubric_author'
  | 'judge' | 'all'), scope_value, task_id, source, criterion,
  judge_model_id, n_labels, agreement, kappa, kappa_lo, kappa_hi,
  self_agreement, verdict, detail (JSON).
A pooled row pools every label of its group; its verdict is `trusted` when
kappa >= min_kappa, `unreliable` under it, `unmeasured` without a kappa.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pyarrow as pa

from tasksieve.transforms.verify.judge.agreement import summarise

GATE_DIR = "judge_gate"

AGREEMENT_SCHEMA = pa.schema(
    [
        pa.field("run_id", pa.string()),
        pa.field("scope", pa.string()),
        pa.field("scope_value", pa.string()),
        pa.field("task_id", pa.string()),
        pa.field("source", pa.string()),
        pa.field("criterion", pa.int64()),
        pa.field("judge_model_id", pa.string()),
        pa.field("n_labels", pa.int64()),
        pa.field("agreement", pa.float64()),
        pa.field("kappa", pa.float64()),
        pa.field("kappa_lo", pa.float64()),
        pa.field("kappa_hi", pa.float64()),
        pa.field("self_agreement", pa.float64()),
        pa.field("verdict", pa.string()),
        pa.field("detail", pa.string()),
    ]
)


def write_records(folder: str | Path, records: list[dict]) -> None:
    """One file per batch, written whole then renamed (a reader never sees half)."""
    if not records:
        return
    Path(folder).mkdir(parents=True, exist_ok=True)
    tmp = Path(folder) / f".{uuid.uuid4().hex}.tmp"
    tmp.write_text(json.dumps(records, ensure_ascii=False))
    os.replace(tmp, tmp.with_name(tmp.name[1:-4] + ".json"))


def read_records(folder: str | Path) -> list[dict]:
    folder = Path(folder)
    out = []
    for f in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        out.extend(json.loads(f.read_text()))
    # One record per task: a re-run bundle (a retried worker) writes it again.
    seen = {}
    for r in out:
        seen[(r.get("source"), r.get("task_id"), r.get("content_hash"))] = r
    return sorted(seen.values(), key=lambda r: (str(r.get("source")), str(r.get("task_id"))))


def _pooled_verdict(kappa, min_kappa: float) -> str:
    if kappa is None:
        return "unmeasured"
    return "trusted" if kappa >= min_kappa else "unreliable"


def agreement_rows(records: list[dict], judge_cfg) -> list[dict]:
    rows = []
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in records:
        judge_id = r.get("judge_model_id")
        detail = {"probes": r.get("probes"), "evidence": r.get("evidence")}
        rows.append(
            {
                "run_id": r["run_id"],
                "scope": "task",
                "scope_value": r.get("task_id"),
                "task_id": r.get("task_id"),
                "source": r.get("source"),
                "criterion": None,
                "judge_model_id": judge_id,
                "n_labels": r["n_labels"],
                "agreement": r["agreement"],
                "kappa": r["kappa"],
                "kappa_lo": r["kappa_lo"],
                "kappa_hi": r["kappa_hi"],
                "self_agreement": r.get("self_agreement"),
                "verdict": r["verdict"],
                "detail": json.dumps(detail, ensure_ascii=False, sort_keys=True),
            }
        )
        by_criterion: dict[int, list[dict]] = {}
        for lab in r.get("labels") or ():
            by_criterion.setdefault(lab["criterion"], []).append(lab)
            for scope, value in (
                ("source", r.get("source")),
                ("grader", lab.get("grader")),
                ("rubric_author", r.get("rubric_author")),
                ("judge", judge_id),
                ("all", "all"),
            ):
                if value is not None:
                    groups.setdefault((scope, str(value), judge_id), []).append(lab)
        for c, labs in sorted(by_criterion.items()):
            s = summarise([x["human"] for x in labs], [x["judge"] for x in labs], 0)
            rows.append(
                {
                    "run_id": r["run_id"],
                    "scope": "criterion",
                    "scope_value": str(c),
                    "task_id": r.get("task_id"),
                    "source": r.get("source"),
                    "criterion": c,
                    "judge_model_id": judge_id,
                    **s,
                    "self_agreement": None,
                    "verdict": _pooled_verdict(s["kappa"], judge_cfg.min_kappa),
                    "detail": None,
                }
            )
    run_id = records[0]["run_id"] if records else None
    for (scope, value, judge_id), labs in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1], str(kv[0][2]))):
        s = summarise(
            [x["human"] for x in labs],
            [x["judge"] for x in labs],
            judge_cfg.bootstrap,
            judge_cfg.min_labels_for_interval,
        )
        rows.append(
            {
                "run_id": run_id,
                "scope": scope,
                "scope_value": value,
                "task_id": None,
                "source": value if scope == "source" else None,
                "criterion": None,
                "judge_model_id": judge_id,
                **s,
                "self_agreement": None,
                "verdict": _pooled_verdict(s["kappa"], judge_cfg.min_kappa),
                "detail": None,
            }
        )
    return rows


def agreement_table(records: list[dict], judge_cfg) -> pa.Table:
    rows = agreement_rows(records, judge_cfg)
    return pa.Table.from_pylist([{f: r.get(f) for f in AGREEMENT_SCHEMA.names} for r in rows], schema=AGREEMENT_SCHEMA)


def cost_rows(records: list[dict], rates) -> list[dict]:
    """Component `judge` rows (attempt_idx NULL) for the gate's judge calls."""
    out = []
    for r in records:
        if not r.get("judge_model_id") or not (
            r.get("judge_prompt_tokens") or r.get("judge_completion_tokens") or r.get("judge_seconds")
        ):
            continue  # no judge call was made for this task
        usd, qty, unit = rates.for_model(r["judge_model_id"]).usd(
            r.get("judge_prompt_tokens") or 0, r.get("judge_completion_tokens") or 0, r.get("judge_seconds") or 0.0
        )
        out.append(
            {
                "run_id": r["run_id"],
                "content_hash": r.get("content_hash"),
                "source": r.get("source"),
                "task_id": r.get("task_id"),
                "component": "judge",
                "quantity": qty,
                "unit": unit,
                "usd": usd,
                "attempt_idx": None,
            }
        )
    return out


def load_table(db_path: Path, run_id: str, table: pa.Table) -> None:
    import duckdb

    con = duckdb.connect(str(db_path))
    try:
        con.execute("BEGIN")
        con.register("src_agreement", table)
        con.execute("CREATE TABLE IF NOT EXISTS judge_agreement AS SELECT * FROM src_agreement LIMIT 0")
        con.execute("DELETE FROM judge_agreement WHERE run_id = ?", [run_id])
        con.execute("INSERT INTO judge_agreement BY NAME SELECT * FROM src_agreement")
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    finally:
        con.close()


def judge_figures(
    records: list[dict], judge_cfg, results: pa.Table, attempts: pa.Table, costs: pa.Table, k: int
) -> dict:
    """Figures for the summary: the judge, its pooled kappa, tasks it could
    not be trusted on, and the money the gate saved (estimated: each
    dropped task at k attempts, at this run's mean cost of a rubric
    attempt, or of any attempt when no rubric task was sampled)."""
    if not records:
        return {}
    labs = [lab for r in records for lab in r.get("labels") or ()]
    pooled = summarise([x["human"] for x in labs], [x["judge"] for x in labs], 0)
    dropped = [r for r in records if r["verdict"] not in ("trusted", "unmeasured")]
    per_attempt = _mean_attempt_usd(results, attempts, costs)
    judges = sorted({str(r.get("judge_model_id")) for r in records})
    selfs = [r["self_agreement"] for r in records if r.get("self_agreement") is not None]
    return {
        "judge_model_id": ", ".join(judges),
        "judge_kappa": pooled["kappa"],
        "judge_labels": pooled["n_labels"],
        "judge_rubric_tasks": len(records),
        "judge_dropped": len(dropped),
        "judge_unmeasured": sum(r["verdict"] == "unmeasured" for r in records),
        "judge_gate_saved_usd": len(dropped) * k * per_attempt if per_attempt is not None else None,
        "judge_gate_saved_attempts": len(dropped) * k,
        "judge_min_kappa": judge_cfg.min_kappa,
        "judge_self_agreement": sum(selfs) / len(selfs) if selfs else None,
    }


def _mean_attempt_usd(results: pa.Table, attempts: pa.Table, costs: pa.Table) -> float | None:
    c = costs.to_pydict()
    per = {}
    for comp, idx, h, usd in zip(c["component"], c["attempt_idx"], c["content_hash"], c["usd"]):
        if idx is not None and comp in ("generation", "verification", "judge"):
            per[(h, idx)] = per.get((h, idx), 0.0) + (usd or 0.0)
    if not per:
        return None
    r = results.select(["content_hash", "domain"]).to_pydict()
    rubric = {h for h, d in zip(r["content_hash"], r["domain"]) if d == "rubric"}
    mine = [v for (h, _), v in per.items() if h in rubric]
    pick = mine or list(per.values())
    return sum(pick) / len(pick)


def judge_line(fig: dict) -> str | None:
    """One line: which judge, its kappa, how many rubric tasks it could not
    be trusted on, how to point [judge] elsewhere."""
    if not fig.get("judge_rubric_tasks"):
        return None
    kappa = (
        "agreement unmeasured (no graded attempts)"
        if fig.get("judge_kappa") is None
        else f"kappa {fig['judge_kappa']:.2f} vs graders on {fig['judge_labels']} labels"
    )
    saved = (
        (
            f"; the gate saved ~${fig['judge_gate_saved_usd']:.4f} ({fig['judge_gate_saved_attempts']} attempts "
            "not sampled)"
        )
        if fig.get("judge_gate_saved_usd") is not None and fig["judge_dropped"]
        else ""
    )
    if fig.get("judge_self_agreement") is not None:
        kappa += f" (self-agreement {fig['judge_self_agreement']:.2f} with the criteria reordered)"
    line = (
        f"rubric judge {fig['judge_model_id']}: {kappa}; "
        f"not trusted on {fig['judge_dropped']} of {fig['judge_rubric_tasks']} rubric tasks (dropped)"
        + (f", {fig['judge_unmeasured']} judged with agreement unmeasured" if fig.get("judge_unmeasured") else "")
        + saved
    )
    if fig["judge_dropped"] or fig.get("judge_unmeasured"):
        line += (
            '; point [judge] at a better model: path = "DIR" or backend = "openai" with [judge.openai] base_url/model'
        )
    return line
