"""`tasksieve select OUT --budget-tasks N | --budget-usd X`: choose a
training set out of a run's learnable pool.

Reads OUT/curation.duckdb (every run in it: the history), takes each task's
pass rate as measured by the *current* model (the model of the latest
sampled run, or of `--run-id`), values, clusters and chooses with the
Beam-free functions of transforms/select/, and writes OUT/selected.parquet
plus the tables `selection`, `selection_clusters` and `selections` in
curation.duckdb. `--dry-run` prints what each budget level would buy and
writes no selection (only the embedding cache). Design and formulas: docs/selection.md.

Exit codes: 0 done; 1 nothing to select from, or the selection could not be
written (no curation.duckdb, no sampled run, unknown run, an empty
learnable pool, a bad config, output folder in use or not writable): one
line on stderr; 2 usage error (a missing, non-numeric, zero or negative
budget, or both budgets): one line on stderr; 6 the disk (or quota) was
full: one line naming the folder and its free space, nothing changed.
"""

from __future__ import annotations

import json
import secrets
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

from tasksieve.pipeline.outputs.output_set import DB, visible
from tasksieve.pipeline.outputs.out_guard import (
    EXIT_DISK_FULL,
    Refused,
    disk_full,
    disk_full_line,
    refuse_dangerous,
    refuse_folders_at_file_names,
)
from tasksieve.pipeline.select.pool import Prepared, SelectError, load_pool, prepare
from tasksieve.pipeline.select.write import held, write_selection
from tasksieve.schemas.config import SelectConfig
from tasksieve.schemas.records import LEARNABLE_SCHEMA
from tasksieve.transforms.select.budget import Budget
from tasksieve.transforms.select.choose import Caps, Choice, choose
from tasksieve.transforms.select.clusters import representatives
from tasksieve.transforms.select.compare import cluster_table, per_dollar, random_baseline
from tasksieve.transforms.select.value import describe

EXIT_CANNOT_SELECT = 1
EXIT_USAGE = 2


def _caps(cfg: SelectConfig) -> Caps:
    return Caps(cluster=cfg.max_cluster_share, source=cfg.max_source_share, domain=cfg.max_domain_share)


def figures(prep: Prepared, choice: Choice, budget: Budget, cfg: SelectConfig) -> dict:
    """The selection's headline figures, with random subsets of its size."""
    chosen = choice.rank > 0
    n = int(chosen.sum())
    value = float(prep.cand.value[chosen].sum())
    usd = float(prep.cand.price[chosen].sum())
    rnd = random_baseline(prep.cand.value, prep.cand.price, n, cfg.random_draws, cfg.seed)
    clusters = np.unique(prep.cand.cluster)
    return {
        "n_pool": len(prep.cand),
        "n_selected": n,
        "spent": choice.spent,
        "selected_value": value,
        "selected_usd": usd,
        "random_value": rnd["value"],
        "random_usd": rnd["usd"],
        "value_ratio": value / rnd["value"] if rnd["value"] > 0 else None,
        "signal_per_usd": per_dollar(value, usd),
        "random_signal_per_usd": per_dollar(rnd["value"], rnd["usd"]),
        "clusters": int(clusters.size),
        "clusters_covered": int(np.unique(prep.cand.cluster[chosen]).size),
        "stopped": _stopped(choice, budget, n),
    }


def _stopped(choice: Choice, budget: Budget, n: int) -> str:
    if n == len(choice.rank):
        return "every candidate was chosen"
    reasons = [r for r, k in zip(choice.reason, choice.rank) if k == 0]
    if budget.kind == "tasks" and n >= budget.amount:
        return "the budget was spent"
    if any("at its cap" in r for r in reasons):
        return "the caps left nothing more to choose"
    return "nothing left fits the remaining budget"


def dry_run_lines(prep: Prepared, budget: Budget, cfg: SelectConfig) -> list[str]:
    from tasksieve.transforms.select.budget import dry_run_levels

    lines = [
        f"{'budget':>16}{'tasks':>7}{'spend':>13}{'signal':>9}{'random':>9}{'per $':>10}{'clusters':>10}  stops because"
    ]
    for level in dry_run_levels(budget):
        f = figures(prep, choose(prep.cand, level, _caps(cfg), cfg.redundancy), level, cfg)
        per = "n/a" if f["signal_per_usd"] is None else f"{f['signal_per_usd']:.4g}"
        lines.append(
            f"{level.text():>16}{f['n_selected']:>7}{'$' + format(f['selected_usd'], ',.4f'):>13}"
            f"{f['selected_value']:>9.3f}{f['random_value']:>9.3f}{per:>10}"
            f"{str(f['clusters_covered']) + '/' + str(f['clusters']):>10}  {f['stopped']}"
        )
    return lines


# --- the tables written --------------------------------------------------


def _selection_rows(prep: Prepared, choice: Choice, sid: str) -> list[dict]:
    """One row per candidate (chosen or not, with why) and per graduated task."""
    c, rows = prep.cand, []
    for i, t in enumerate(prep.pool.tasks):
        like = int(choice.nearest[i])
        rows.append(
            {
                "selection_id": sid,
                "run_id": t["run_id"],
                "model_id": t["model_id"],
                "source": t["source"],
                "task_id": t["task_id"],
                "content_hash": t["content_hash"],
                "batch_id": t["batch_id"],
                "domain": t["domain"],
                "difficulty": t["difficulty"],
                "n_attempts": t["n_attempts"],
                "n_pass": t["n_pass"],
                "pass_rate": t["pass_rate"],
                "p_shrunk": float(prep.p_shrunk[i]),
                "value": float(c.value[i]),
                "price_usd": float(c.price[i]),
                "cluster": int(c.cluster[i]),
                "selected": bool(choice.rank[i] > 0),
                "rank": int(choice.rank[i]) or None,
                "marginal_value": float(choice.marginal[i]),
                "similarity": float(choice.similarity[i]),
                "like_task_id": c.task_id[like] if like >= 0 else None,
                "reason": choice.reason[i],
                "graduated": False,
            }
        )
    for g in prep.pool.graduated:
        rows.append(
            {
                "selection_id": sid,
                "run_id": g["run_id"],
                "model_id": g["model_id"],
                "source": g["source"],
                "task_id": g["task_id"],
                "content_hash": g["content_hash"],
                "batch_id": g["batch_id"],
                "domain": g["domain"],
                "difficulty": g["difficulty"],
                "n_attempts": g["n_attempts"],
                "n_pass": g["n_pass"],
                "pass_rate": g["pass_rate"],
                "selected": False,
                "graduated": True,
                "reason": f"graduated: all_pass under {g['model_id']} (learnable under {g['was_learnable_under']})",
            }
        )
    return rows


SELECTION_SCHEMA = pa.schema(
    [
        pa.field(n, pa.string())
        for n in (
            "selection_id",
            "run_id",
            "model_id",
            "source",
            "task_id",
            "content_hash",
            "batch_id",
            "domain",
            "difficulty",
        )
    ]
    + [pa.field("n_attempts", pa.int64()), pa.field("n_pass", pa.int64())]
    + [pa.field(n, pa.float64()) for n in ("pass_rate", "p_shrunk", "value", "price_usd")]
    + [
        pa.field("cluster", pa.int64()),
        pa.field("selected", pa.bool_()),
        pa.field("rank", pa.int64()),
        pa.field("marginal_value", pa.float64()),
        pa.field("similarity", pa.float64()),
        pa.field("like_task_id", pa.string()),
        pa.field("reason", pa.string()),
        pa.field("graduated", pa.bool_()),
    ]
)

# selected.parquet: what a trainer loads (the learnable set's fields) plus why each row is there.
SELECTED_EXTRA = (
    "selection_id",
    "rank",
    "value",
    "p_shrunk",
    "marginal_value",
    "price_usd",
    "cluster",
    "reason",
    "run_id",
    "model_id",
)


def _selected_table(prep: Prepared, rows: list[dict]) -> pa.Table:
    """The chosen rows in rank order, each with its task's own fields."""
    by_key = {(t["source"], t["task_id"], t["content_hash"]): t for t in prep.pool.tasks}
    out = []
    for r in sorted((r for r in rows if r["selected"]), key=lambda r: r["rank"]):
        task = by_key[(r["source"], r["task_id"], r["content_hash"])]
        out.append({**{n: task.get(n) for n in LEARNABLE_SCHEMA.names}, **{n: r[n] for n in SELECTED_EXTRA}})
    extra = [SELECTION_SCHEMA.field(n) for n in SELECTED_EXTRA]
    return pa.Table.from_pylist(out, schema=pa.schema(list(LEARNABLE_SCHEMA) + extra))


def _cluster_rows(prep: Prepared, choice: Choice, sid: str, cfg: SelectConfig) -> list[dict]:
    rows = cluster_table(prep.cand.cluster, prep.cand.value, choice.rank > 0, prep.expert_usd)
    reps = (
        representatives(prep.vecs, prep.cand.cluster, cfg.representatives)
        if prep.vecs is not None
        else {0: list(range(min(cfg.representatives, len(prep.cand))))}
    )
    for r in rows:
        r["selection_id"] = sid
        r["representatives"] = json.dumps(
            [
                {"task_id": prep.cand.task_id[i], "prompt": (prep.pool.tasks[i]["prompt"] or "")[:200]}
                for i in reps[r["cluster"]]
            ],
            ensure_ascii=False,
        )
    return rows


# --- the command -----------------------------------------------------------


def new_selection_id() -> str:
    return "select-" + datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def _summary_row(prep: Prepared, fig: dict, budget: Budget, cfg: SelectConfig, sid: str) -> dict:
    run = prep.pool.run
    return {
        "selection_id": sid,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "run_id": run["run_id"],
        "model_id": run["model_id"],
        "budget_kind": budget.kind,
        "budget": budget.amount,
        **fig,
        "n_graduated": len(prep.pool.graduated),
        "n_unmeasured": prep.pool.unmeasured,
        "value_formula": describe(cfg.value, cfg.prior_strength),
        "prior_mean": prep.prior_mean,
        "group_size": prep.group_size,
        "config": json.dumps(cfg.model_dump(mode="json"), sort_keys=True),
    }


def select(
    out_dir: str | Path,
    budget: Budget,
    cfg: SelectConfig,
    run_id: str | None = None,
    dry_run: bool = False,
    by: tuple[str, ...] = ("cluster", "source"),
) -> str:
    """Choose (or, with dry_run, price every budget level); returns the text to print."""
    out = Path(out_dir)
    if not out.is_dir():
        raise SelectError(f"{out} is not a folder; give the --out folder of a `tasksieve run`")
    # The lock from the start, like `run` and `dedup`: a second `select` (or
    # a run) into OUT refuses at once instead of choosing from a pool that
    # is about to change, and two selections never both claim selected.parquet.
    with held(out, SelectError):
        try:
            refuse_folders_at_file_names(out)
        except Refused as e:
            raise SelectError(str(e)) from None
        return _select_held(out, budget, cfg, run_id, dry_run, by)


def _select_held(
    out: Path, budget: Budget, cfg: SelectConfig, run_id: str | None, dry_run: bool, by: tuple[str, ...]
) -> str:
    prep = prepare(load_pool(visible(out, DB), run_id), cfg, out)
    head = _head_lines(prep, budget, cfg)
    if dry_run:
        return "\n".join(head + [""] + dry_run_lines(prep, budget, cfg) + ["", "dry run: no selection written"])
    choice = choose(prep.cand, budget, _caps(cfg), cfg.redundancy)
    fig = figures(prep, choice, budget, cfg)
    sid = new_selection_id()
    rows = _selection_rows(prep, choice, sid)
    clusters = _cluster_rows(prep, choice, sid, cfg)
    tables = {
        "selection": pa.Table.from_pylist(rows, schema=SELECTION_SCHEMA),
        "selection_clusters": pa.Table.from_pylist(clusters),
        "selections": pa.Table.from_pylist([_summary_row(prep, fig, budget, cfg, sid)]),
    }
    try:
        write_selection(out, _selected_table(prep, rows), tables, sid)
    except (OSError, duckdb.Error) as e:
        if disk_full(e)[0]:
            raise
        raise SelectError(f"cannot write the selection into {out}: {' '.join(str(e).split())[:300]}") from None
    return "\n".join(
        head
        + [""]
        + summary_lines(prep, fig, rows, clusters, by)
        + [
            "",
            f"outputs in {out}: selected.parquet; tables selection, selection_clusters, selections in curation.duckdb "
            f"(selection_id {sid})",
            f"report: tasksieve report {out}",
        ]
    )


def _head_lines(prep: Prepared, budget: Budget, cfg: SelectConfig) -> list[str]:
    run, pool = prep.pool.run, prep.pool
    lines = [
        f"selecting from run {run['run_id']} (model {run['model_id']}): {len(prep.cand)} learnable tasks, "
        f"budget {budget.text()}",
        f"{describe(cfg.value, cfg.prior_strength)}; pool mean m = {prep.prior_mean:.3f}; "
        f"price = {prep.group_size} rollouts at the run's rates",
    ]
    if pool.graduated:
        lines.append(
            f"graduated: {len(pool.graduated)} tasks learnable under an earlier model are all_pass under "
            f"{run['model_id']}; not drawn from"
        )
    if pool.unmeasured:
        lines.append(
            f"not measured by {run['model_id']}: {pool.unmeasured} tasks learnable under an earlier model; "
            "run them with the current model to include them"
        )
    return lines


def _breakdown(rows: list[dict], dim: str, clusters: list[dict]) -> list[str]:
    pool: dict = {}
    for r in rows:
        if not r["graduated"]:
            n, s, v = pool.get(r[dim], (0, 0, 0.0))
            pool[r[dim]] = (n + 1, s + r["selected"], v + (r["value"] if r["selected"] else 0.0))
    label = {c["cluster"]: json.loads(c["representatives"])[0]["prompt"][:50] for c in clusters}
    lines = [f"{'by ' + dim:<14}{'pool':>6}{'selected':>10}{'signal':>9}" + ("  e.g." if dim == "cluster" else "")]
    for key in sorted(pool, key=lambda k: (str(type(k)), k if k is not None else "")):
        n, s, v = pool[key]
        eg = f"  {label.get(key, '')!r}" if dim == "cluster" else ""
        lines.append(f"{str(key):<14}{n:>6}{s:>10}{v:>9.3f}{eg}")
    return lines


def summary_lines(prep: Prepared, fig: dict, rows: list[dict], clusters: list[dict], by: tuple[str, ...]) -> list[str]:
    per = lambda x: "n/a" if x is None else f"{x:,.4g}"
    ratio = "n/a" if fig["value_ratio"] is None else f"{fig['value_ratio']:.2f}x"
    lines = [
        f"selected {fig['n_selected']} of {fig['n_pool']} ({fig['stopped']}); spend ${fig['selected_usd']:,.4f}",
        f"signal {fig['selected_value']:.3f} vs {fig['random_value']:.3f} for random subsets of the same size "
        f"({ratio}); signal per dollar {per(fig['signal_per_usd'])} vs {per(fig['random_signal_per_usd'])}",
        f"clusters covered {fig['clusters_covered']} of {fig['clusters']}",
    ]
    for dim in by:
        lines += [""] + _breakdown(rows, dim, clusters)
    buy = sorted((c for c in clusters if c["buy_next_rank"]), key=lambda c: c["buy_next_rank"])[:3]
    if buy:
        lines += ["", "where to buy next (clusters the selection exhausted, by signal per expert dollar):"]
        for c in buy:
            cost = (
                "expert cost unknown"
                if c["expert_usd_per_task"] is None
                else f"${c['expert_usd_per_task']:,.2f} per task from experts"
            )
            lines.append(
                f"  cluster {c['cluster']}: {c['selected']} of {c['tasks']} chosen, mean signal "
                f"{c['mean_value']:.3f}, {cost}"
            )
    return lines


def command(args) -> int:
    """`tasksieve select` from parsed arguments: prints, returns the exit code."""
    import sys

    from tasksieve.schemas.config import ConfigError, load_config
    from tasksieve.transforms.select.budget import BudgetError, parse_budget

    def say(message: str) -> None:
        print(f"tasksieve: error: {message}", file=sys.stderr, flush=True)

    try:
        budget = parse_budget(args.budget_tasks, args.budget_usd)
        refuse_dangerous(args.out, "OUT")
    except (BudgetError, Refused) as e:
        say(str(e))
        return EXIT_USAGE
    try:
        cfg = load_config(args.config).select
        text = select(args.out, budget, cfg, args.run_id, args.dry_run, tuple(args.by or ("cluster", "source")))
    except (SelectError, ConfigError) as e:
        say(str(e))
        return EXIT_CANNOT_SELECT
    except (OSError, duckdb.Error) as e:
        line = disk_full_line(e, [("output folder", Path(args.out))])
        if line:
            say(line)
            return EXIT_DISK_FULL
        say(f"cannot select from {args.out}: {' '.join(str(e).split())[:300]}")
        return EXIT_CANNOT_SELECT
    print(text)
    return 0
