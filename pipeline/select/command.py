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

import hashlib
import json
import secrets
import zipfile
from dataclasses import dataclass
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
from tasksieve.pipeline.outputs.safe_fs import real_subdir, write_atomic
from tasksieve.pipeline.select.write import held, write_selection
from tasksieve.schemas.config import SelectConfig
from tasksieve.schemas.records import LEARNABLE_SCHEMA
from tasksieve.transforms.select.budget import Budget, training_price
from tasksieve.transforms.select.choose import Candidates, Caps, Choice, choose
from tasksieve.transforms.select.clusters import auto_k, embed_prompts, kmeans, representatives
from tasksieve.transforms.select.compare import cluster_table, per_dollar, random_baseline
from tasksieve.transforms.select.value import describe, task_values

EXIT_CANNOT_SELECT = 1
EXIT_USAGE = 2


class SelectError(Exception):
    """Nothing can be selected or written; one line for a person."""


def dict_rows(con, sql: str, params=()) -> list[dict]:
    cur = con.execute(sql, list(params))
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


def current_run(con, db_path: Path, run_id: str | None) -> dict:
    """The run whose model is 'current': `run_id`, or the latest run that sampled."""
    try:
        runs = dict_rows(con, "SELECT * FROM runs ORDER BY started_at, run_id")
    except duckdb.CatalogException:
        raise SelectError(f"{db_path} holds no runs; run `tasksieve run` into this folder first") from None
    sampled = [r for r in runs if r.get("model_id")]
    if run_id is not None:
        run = next((r for r in runs if r["run_id"] == run_id), None)
        if run is None:
            raise SelectError(f"run {run_id} is not in {db_path} (known: {', '.join(r['run_id'] for r in runs)})")
        if not run.get("model_id"):
            raise SelectError(f"run {run_id} sampled nothing (a `dedup` run); name a `tasksieve run`")
        return run
    if not sampled:
        raise SelectError(f"{db_path} holds no sampled run (only `dedup` runs); run `tasksieve run` first")
    return sampled[-1]


# Each task's latest measurement by the current model, up to the current run.
_MEASURED = """
WITH measured AS (
  SELECT t.*, r.model_id, r.started_at,
         row_number() OVER (PARTITION BY t.content_hash ORDER BY r.started_at DESC, t.run_id DESC) AS recency
  FROM tasks t JOIN runs r USING (run_id)
  WHERE r.model_id = ? AND r.started_at <= ? AND t.n_attempts > 0)
SELECT * EXCLUDE (recency) FROM measured WHERE recency = 1
"""

# Tasks that were learnable under another model and are all_pass now.
_GRADUATED = f"""
WITH now AS ({_MEASURED})
SELECT now.*, arg_max(r.model_id, r.started_at) AS was_learnable_under
FROM now JOIN tasks p ON p.content_hash = now.content_hash AND p.status = 'learnable'
JOIN runs r ON r.run_id = p.run_id AND r.model_id <> now.model_id AND r.started_at < now.started_at
WHERE now.status = 'all_pass'
GROUP BY ALL
"""

# Learnable before, never measured by the current model: not drawn from.
_UNMEASURED = f"""
WITH now AS ({_MEASURED})
SELECT count(DISTINCT p.content_hash) FROM tasks p JOIN runs r USING (run_id)
WHERE p.status = 'learnable' AND r.model_id <> ? AND p.content_hash NOT IN (SELECT content_hash FROM now)
"""

_ATTEMPT_MEANS = """
SELECT run_id, content_hash, any_value(model_id) AS attempt_model, avg(coalesce(prompt_tokens, 0)) AS prompt_tokens,
       avg(coalesce(completion_tokens, 0)) AS completion_tokens, avg(coalesce(gen_seconds, 0)) AS gen_seconds
FROM attempts GROUP BY run_id, content_hash
"""

_EXPERT = """
SELECT run_id, source, task_id, sum(usd) FILTER (WHERE unit <> 'unpriced') AS expert_usd
FROM costs WHERE component = 'expert' GROUP BY ALL
"""


@dataclass
class Pool:
    run: dict
    tasks: list[dict]  # the candidates, sorted by task_id, source, content_hash
    graduated: list[dict]
    unmeasured: int


def load_pool(db_path: Path, run_id: str | None = None) -> Pool:
    if not db_path.exists():
        raise SelectError(f"no curation.duckdb in {db_path.parent}; run `tasksieve run --out {db_path.parent}` first")
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        run = current_run(con, db_path, run_id)
        key = [run["model_id"], run["started_at"]]
        tasks = dict_rows(
            con,
            f"""
            WITH now AS ({_MEASURED}), means AS ({_ATTEMPT_MEANS}), expert AS ({_EXPERT})
            SELECT now.*, means.attempt_model, means.prompt_tokens, means.completion_tokens, means.gen_seconds,
                   expert.expert_usd
            FROM now LEFT JOIN means USING (run_id, content_hash) LEFT JOIN expert USING (run_id, source, task_id)
            WHERE now.status = 'learnable' ORDER BY task_id, source, content_hash""",
            key,
        )
        graduated = dict_rows(con, _GRADUATED + " ORDER BY task_id, source", key)
        unmeasured = con.execute(_UNMEASURED, key + [run["model_id"]]).fetchone()[0]
    finally:
        con.close()
    return Pool(run=run, tasks=tasks, graduated=graduated, unmeasured=int(unmeasured or 0))


def _prices(pool: Pool, group_size: int) -> np.ndarray:
    """Training price per task: its mean attempt at the rates the run used."""
    from tasksieve.schemas.config import ConfigError
    from tasksieve.schemas.rates import Rates, load_rates

    rates = Rates.model_validate_json(pool.run["rates"]) if pool.run.get("rates") else load_rates(None)
    per_attempt = []
    for t in pool.tasks:
        try:
            rate = rates.for_model(t.get("attempt_model") or pool.run["model_id"])
        except ConfigError as e:
            raise SelectError(str(e)) from None
        usd, _, _ = rate.usd(t["prompt_tokens"] or 0, t["completion_tokens"] or 0, t["gen_seconds"] or 0.0)
        per_attempt.append(usd)
    return training_price(np.array(per_attempt, dtype=np.float64), group_size)


@dataclass
class Prepared:
    """The pool made ready to choose from, once for every budget level."""

    pool: Pool
    cand: Candidates
    p_shrunk: np.ndarray
    prior_mean: float
    expert_usd: np.ndarray
    group_size: int
    vecs: np.ndarray | None


EMBED_CACHE = "select_cache/embeddings.npz"


def _load_cache(path: Path, model: str) -> dict:
    try:
        with np.load(path, allow_pickle=False) as z:
            keys, vecs = z["keys"], z["vecs"]
            # OUT may be shared: a cache from another model, or one that is
            # not a clean (keys, finite float vectors) pair, is ignored.
            if (
                str(z["model"]) != model
                or vecs.ndim != 2
                or len(keys) != len(vecs)
                or vecs.dtype.kind != "f"
                or not np.isfinite(vecs).all()
            ):
                return {}
            return dict(zip(keys.tolist(), vecs))
    except (OSError, ValueError, KeyError, zipfile.BadZipFile):
        return {}  # no cache yet, or a damaged one: embed again


def cached_embeddings(out: Path, prompts: list[str]) -> np.ndarray:
    """Prompt embeddings, kept in OUT/select_cache (never outside OUT) by a
    hash of the prompt text: the embedding model costs ~10-30 ms a prompt on
    a CPU, so a second `select` or a dry run of the same pool embeds
    nothing. Writing the cache is best effort (temp file + rename)."""
    from tasksieve.transforms.same_problem.embed import MODEL_NAME

    keys = [hashlib.blake2b(p.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest() for p in prompts]
    path = out / EMBED_CACHE
    known = _load_cache(path, MODEL_NAME)
    missing = list(dict.fromkeys(p for k, p in zip(keys, prompts) if k not in known))
    if missing:
        fresh = embed_prompts(missing)
        fresh_keys = [hashlib.blake2b(p.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest() for p in missing]
        known.update(zip(fresh_keys, fresh))

        def save(tmp: Path) -> None:
            with open(tmp, "wb") as fh:  # a file object: np.savez would add ".npz" to a name
                np.savez(
                    fh, model=np.array(MODEL_NAME), keys=np.array(list(known)), vecs=np.stack(list(known.values()))
                )

        try:
            # A real folder of OUT's (a link planted there is removed, not
            # followed), written through a fresh temporary name.
            write_atomic(real_subdir(out, path.parent.name) / path.name, save)
        except OSError:
            pass  # a cache: the selection goes on without it
    return np.stack([known[k] for k in keys]).astype(np.float32)


def prepare(pool: Pool, cfg: SelectConfig, out: Path) -> Prepared:
    if not pool.tasks:
        raise SelectError(
            f"run {pool.run['run_id']} (model {pool.run['model_id']}) has no learnable task to select from"
        )
    group = cfg.group_size or int(pool.run.get("k") or 8)
    t = pool.tasks
    value, p, m = task_values(
        [r["n_pass"] for r in t], [r["n_attempts"] for r in t], cfg.value, cfg.prior_strength, group
    )
    vecs, cluster = None, np.zeros(len(t), dtype=np.int64)
    if cfg.diversity:
        from tasksieve.transforms.same_problem.embed import EmbeddingUnavailable

        try:
            vecs = cached_embeddings(out, [r["prompt"] or "" for r in t])
        except EmbeddingUnavailable as e:
            raise SelectError(f"{e}; or set [select] diversity = false") from None
        cluster = kmeans(vecs, cfg.clusters or auto_k(len(t)), seed=cfg.seed)
    cand = Candidates(
        task_id=[r["task_id"] for r in t],
        value=value,
        price=_prices(pool, group),
        cluster=cluster,
        source=[r["source"] or "(none)" for r in t],
        domain=[r["domain"] or "(none)" for r in t],
        vecs=vecs,
    )
    expert = np.array([np.nan if r["expert_usd"] is None else r["expert_usd"] for r in t], dtype=np.float64)
    return Prepared(pool, cand, p, m, expert, group, vecs)


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
