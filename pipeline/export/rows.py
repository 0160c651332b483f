"""What `tasksieve export` exports, read from OUT/curation.duckdb: the
learnable tasks of one run (default: the latest run that sampled), or the
tasks a `tasksieve select` selection chose, each with the run that
measured it (run id, model id) and that run's system prompt for its domain.

The database, not the Parquet files, is read: it keeps every run and every
selection, so `--run-id` and `--selection` can name older ones.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import duckdb

from tasksieve.pipeline.select.pool import dict_rows


class ExportError(Exception):
    """Nothing can be exported; one line for a person."""


@dataclass
class ExportSource:
    rows: list[dict]  # task rows (Task fields, pass statistics, run_id, model_id), in a stable order
    run_id: str  # the run whose learnable set this is (a selection: the run it was drawn for)
    model_id: str | None
    system_prompts: dict[str, str]  # domain -> the system prompt curation sampled with
    selection_id: str | None


def _run(con, db: Path, run_id: str | None) -> dict:
    """The run whose learnable set is exported: `tasksieve select`'s rule
    (the named run, else the latest run that sampled)."""
    from tasksieve.pipeline.select.pool import SelectError, current_run

    try:
        return current_run(con, db, run_id)
    except SelectError as e:
        raise ExportError(str(e)) from None


def system_prompts_of(config_json: str | None) -> dict[str, str]:
    """domain -> system prompt, as the run's recorded config had them."""
    from tasksieve.schemas.config import RunConfig
    from tasksieve.schemas.records import DOMAINS

    try:
        sampling = RunConfig.model_validate(json.loads(config_json or "{}")).sampling
    except Exception:  # an older or odd config: the defaults, as that run would have had them
        sampling = RunConfig().sampling
    return {d: sampling.system_prompts.get(d, sampling.system_prompt) for d in DOMAINS}


_ORDER = "ORDER BY t.task_id, t.source, t.content_hash"


def read_export_source(out: Path, run_id: str | None = None, selection_id: str | None = None) -> ExportSource:
    from tasksieve.pipeline.outputs.output_set import visible

    db = visible(out, "curation.duckdb")  # through OUT/current: a link planted at OUT/curation.duckdb is not read
    if not db.is_file():
        raise ExportError(f"{out} holds no curation.duckdb; run `tasksieve run --out {out}` first")
    try:
        con = duckdb.connect(str(db), read_only=True)
    except duckdb.Error as e:
        raise ExportError(f"cannot open {db}: {' '.join(str(e).split())[:200]}") from None
    try:
        if selection_id is not None:
            return _selection(con, db, selection_id)
        run = _run(con, db, run_id)
        rows = dict_rows(
            con,
            f"SELECT t.*, ? AS model_id FROM tasks t WHERE t.run_id = ? AND t.status = 'learnable' {_ORDER}",
            [run["model_id"], run["run_id"]],
        )
        return ExportSource(rows, run["run_id"], run["model_id"], system_prompts_of(run["config"]), None)
    finally:
        con.close()


def _selection(con, db: Path, selection_id: str) -> ExportSource:
    try:
        known = dict_rows(con, "SELECT selection_id, run_id FROM selections WHERE selection_id = ?", [selection_id])
    except duckdb.CatalogException:
        raise ExportError(f"{db} holds no selections; run `tasksieve select` first") from None
    if not known:
        raise ExportError(f"selection {selection_id} is not in {db}")
    run = _run(con, db, known[0]["run_id"])
    # Each chosen task as measured by the run its selection row names.
    rows = dict_rows(
        con,
        f"""SELECT t.*, s.model_id AS model_id, s.rank AS selection_rank FROM selection s
        JOIN tasks t ON t.run_id = s.run_id AND t.source IS NOT DISTINCT FROM s.source
             AND t.task_id IS NOT DISTINCT FROM s.task_id AND t.content_hash = s.content_hash
        WHERE s.selection_id = ? AND s.selected {_ORDER}""",
        [selection_id],
    )
    return ExportSource(rows, run["run_id"], run["model_id"], system_prompts_of(run["config"]), selection_id)
