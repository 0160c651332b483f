"""What `tasksieve select` chooses from: the learnable pool of OUT's
curation.duckdb as measured by the current model (`load_pool`), and the
pool prepared for choosing: values, prices, embeddings (cached in OUT,
keyed by the embedding model) and clusters (`prepare`). Read-only on the
database: writing the selection is command.py's and write.py's."""

from __future__ import annotations

import hashlib
import zipfile
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np

from tasksieve.pipeline.outputs.safe_fs import real_subdir, write_atomic
from tasksieve.schemas.config import SelectConfig
from tasksieve.transforms.select.budget import training_price
from tasksieve.transforms.select.choose import Candidates
from tasksieve.transforms.select.clusters import auto_k, embed_prompts, kmeans
from tasksieve.transforms.select.value import task_values


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
