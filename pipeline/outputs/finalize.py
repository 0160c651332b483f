"""Outputs: staged shards -> sorted Parquet files, the DuckDB database,
the row-accounting check and the end-of-run summary.

Files in OUT:
- learnable.parquet  the training set (Task fields + pass statistics)
- results.parquet    every input row: status, pass counts, drop stage/reason/detail
- attempts.parquet   every attempt: completion, tokens, finish reason, verdict
- quarantine.parquet unusable rows: source file, line, reason, raw text
- costs.parquet      one row per (task or attempt, cost component)
- curation.duckdb    tables runs, tasks, attempts, drops, costs, quarantine and
                     the analyst views of pipeline/outputs/views.py; runs accumulate
                     (run_id on every row)

`finalize` writes them into a new output set's folder (output_set.py),
which becomes current in one step: OUT/<name> are links through
OUT/current, so readers see one whole set.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tasksieve.pipeline.outputs.output_set import visible
from tasksieve.pipeline.outputs.safe_fs import step, write_atomic
from tasksieve.pipeline.outputs.staging import SUFFIX as STAGED_SUFFIX
from tasksieve.pipeline.outputs.views import create_views
from tasksieve.schemas.records import LEARNABLE_SCHEMA, RUN_SCHEMA, STATUSES, conform

SORT_KEYS = {
    "results": [("source", "ascending"), ("task_id", "ascending"), ("source_file", "ascending"), ("line", "ascending")],
    "attempts": [("content_hash", "ascending"), ("attempt_idx", "ascending")],
    "quarantine": [("source_file", "ascending"), ("line", "ascending")],
    "costs": [
        ("source", "ascending"),
        ("task_id", "ascending"),
        ("component", "ascending"),
        ("attempt_idx", "ascending"),
    ],
}


class AccountingError(Exception):
    """Rows were lost or double-counted: the run's outputs cannot be trusted."""


def read_staged(staging_dir: Path, name: str, schema: pa.Schema) -> pa.Table:
    folder = staging_dir / name
    files = sorted(str(f) for f in folder.glob(f"*{STAGED_SUFFIX}")) if folder.exists() else []
    if not files:  # an empty PCollection may leave no shard at all
        return schema.empty_table()

    # Each file in full, one after another (not pyarrow.dataset, whose import
    # alone was 0.4 s of every run): staged files are this run's own, in its
    # private staging folder, written with `schema`; cast() refuses one that
    # is not. Memory-mapped, so reading copies nothing; the sort then builds
    # the sorted table a column at a time, each from maps opened for it and
    # closed after it, so no more than one unsorted column is ever resident
    # beside the sorted ones. Read whole and sorted whole, a million-row run
    # held its results twice, the peak of the run (bench/README.md, "1M peak").
    def mapped(columns: list[str]) -> pa.Table:
        want = pa.schema([schema.field(c) for c in columns])
        parts = []
        for f in files:
            with pa.memory_map(f, "r") as source:
                parts.append(pa.ipc.open_file(source).read_all().select(columns).cast(want))
        return pa.concat_tables(parts)

    keys = [k for k, _ in SORT_KEYS[name]]
    order = pc.sort_indices(mapped(keys), sort_keys=SORT_KEYS[name])
    return pa.table([pc.take(mapped([field.name])[0], order) for field in schema], schema=schema)


def return_freed_memory() -> None:
    """Gives back to the system what the finished pipeline freed, before
    finalize reads the outputs in: the C heap keeps freed memory for reuse
    unless asked (malloc_trim), and a million-row run's graph left ~300 MB
    of it, on top of which finalize's tables came (bench/README.md, "1M
    peak"). Only where the C library is glibc; elsewhere a no-op."""
    import ctypes
    import gc

    gc.collect()
    pa.default_memory_pool().release_unused()
    try:  # the C library already loaded in this process: no search for it on every run
        trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
    except (OSError, TypeError):  # no process-wide handle (Windows)
        trim = None
    if trim is not None:  # None where the C library is not glibc (musl, macOS): nothing to ask
        trim(0)


def write_parquet_atomic(table: pa.Table, path: Path) -> None:
    """Write through a fresh temporary file, then rename: an interrupted run
    never leaves a half-written file where a finished one was, and a link
    planted at `path` is replaced, never written through."""
    write_atomic(path, lambda tmp: pq.write_table(table, tmp))


def write_files(
    out: Path,
    tables: dict[str, pa.Table],
    names: tuple[str, ...] | None = None,
    learnable_file: bool = True,
    meta: dict[str, str] | None = None,
) -> pa.Table:
    """Write the tables named in `names` (default: all) as OUT/<name>.parquet,
    and learnable.parquet unless `learnable_file` is false (`dedup` leaves a
    run's training set alone); each file carries `meta`, the run's
    provenance (pipeline/outputs/provenance.py), as key-value metadata."""
    from tasksieve.pipeline.outputs.provenance import stamped

    for name, table in tables.items():
        if names is None or name in names:
            write_parquet_atomic(stamped(table, meta or {}), out / f"{name}.parquet")
    results = tables["results"]
    learnable = results.filter(pc.equal(results["status"], "learnable")).select(LEARNABLE_SCHEMA.names)
    learnable = learnable.cast(LEARNABLE_SCHEMA)
    if learnable_file:
        write_parquet_atomic(stamped(learnable, meta or {}), out / "learnable.parquet")
    return learnable


def status_counts(results: pa.Table) -> dict[str, int]:
    # value_counts, not group_by: group_by loads pyarrow.acero and with it
    # pyarrow.dataset, 0.15 s of every run. A null status is a key of its
    # own, which check_accounting refuses as unknown.
    counts = {s: 0 for s in STATUSES}
    for row in pc.value_counts(results["status"]).to_pylist():
        counts[row["values"]] = row["counts"]
    return counts


def check_accounting(
    rows_in: int, results: pa.Table, quarantine: pa.Table, rows_read: int | None = None
) -> dict[str, int]:
    """rows_in == learnable + all_pass + all_fail + dropped + quarantined,
    where rows_in is counted from the inputs without parsing them (physical
    lines, row-group row counts), independently of the reader and results.
    `rows_read`, the rows the reader produced, only makes the message say
    where a difference comes from."""
    counts = status_counts(results)
    unknown = set(counts) - set(STATUSES)
    if unknown:
        raise AccountingError(f"unknown statuses in results: {sorted(unknown)}")
    total = sum(counts.values())
    if total != rows_in:
        where = ""
        if rows_read is not None and rows_read != rows_in:
            where = f"; the reader produced {rows_read} rows, so it skipped or added some"
        raise AccountingError(
            f"row accounting failed: {rows_in} rows read but {total} rows accounted for "
            f"({', '.join(f'{k}={v}' for k, v in counts.items())}){where}"
        )
    if quarantine.num_rows != counts["quarantined"]:
        raise AccountingError(
            f"quarantine.parquet has {quarantine.num_rows} rows but {counts['quarantined']} are quarantined"
        )
    return counts


TABLE_FILES = {"tasks": "results", "attempts": "attempts", "costs": "costs", "quarantine": "quarantine"}


def sql_identifier(name: str) -> str:
    """A column or table name quoted for SQL (identifiers cannot be parameters)."""
    return '"' + name.replace('"', '""') + '"'


def _add_new_columns(con, table: str, src: str) -> None:
    """A database written by an older version lacks columns added to the
    contracts since (fields are added, never renamed): add them, null for
    the earlier runs, so history keeps accumulating in one file."""
    have = {r[0] for r in con.execute(f"DESCRIBE {table}").fetchall()}
    for name, dtype, *_ in con.execute(f"DESCRIBE SELECT * FROM {src}").fetchall():
        if name not in have:
            con.execute(f"ALTER TABLE {table} ADD COLUMN {sql_identifier(name)} {dtype}")


# DuckDB's buffer for the load. Appends go to the database file as they
# fill, so a small buffer does not limit what can be loaded (3M rows of the
# bench pool's results and costs load at 256MB as at 1GB, in the same time);
# it bounds what DuckDB holds beside the run's own tables, the peak of a 1M
# run: 1GB -> 256MB took ~135 MB off it (bench/README.md, "1M peak").
DUCKDB_MEMORY = "256MB"


@contextlib.contextmanager
def transaction(db_path: Path):
    """A connection to the database with one transaction open: committed when
    the block ends, rolled back if it raises (a failure leaves nothing)."""
    con = duckdb.connect(str(db_path))
    try:
        # DuckDB's default buffer is 80% of RAM; the run's own Arrow tables
        # are already in memory, so loading a million rows must not double it.
        con.execute(f"SET memory_limit = '{DUCKDB_MEMORY}'")
        # One thread: the load is a few inserts and a commit, which a second
        # thread only slowed (a 100k-task run's tables: 0.97-1.15 s with
        # DuckDB's default of one per core here, 0.79-0.94 s with one).
        con.execute("SET threads = 1")
        con.execute("BEGIN")
        yield con
        step(f"commit {db_path.name}")
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    finally:
        con.close()


def load_duckdb(out: Path, run_row: dict, tables: dict[str, pa.Table] | None = None) -> Path:
    """Append this run to OUT/curation.duckdb (earlier runs stay: history).
    The run's own tables are handed to DuckDB as Arrow tables (default: read
    from OUT's Parquet files), so no path or value is ever spliced into SQL
    and what is loaded is this run's data, whatever else is in the folder."""
    if tables is None:
        tables = {fname: pq.read_table(out / f"{fname}.parquet") for fname in TABLE_FILES.values()}
    db_path = out / "curation.duckdb"
    with transaction(db_path) as con:
        for table, fname in TABLE_FILES.items():
            src = f"src_{fname}"
            con.register(src, tables[fname])
            con.execute(f"CREATE TABLE IF NOT EXISTS {table} AS SELECT * FROM {src} LIMIT 0")
            _add_new_columns(con, table, src)
            con.execute(f"DELETE FROM {table} WHERE run_id = ?", [run_row["run_id"]])
            con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM {src}")
            con.unregister(src)
        con.execute("CREATE TABLE IF NOT EXISTS drops AS SELECT * FROM tasks LIMIT 0")
        _add_new_columns(con, "drops", "tasks")
        con.execute("DELETE FROM drops WHERE run_id = ?", [run_row["run_id"]])
        con.execute(
            "INSERT INTO drops BY NAME SELECT * FROM tasks WHERE run_id = ? AND status = 'dropped'", [run_row["run_id"]]
        )
        run_tbl = pa.Table.from_pylist([conform(run_row, RUN_SCHEMA)], schema=RUN_SCHEMA)
        con.register("run_row", run_tbl)
        con.execute("CREATE TABLE IF NOT EXISTS runs AS SELECT * FROM run_row LIMIT 0")
        _add_new_columns(con, "runs", "run_row")
        con.execute("DELETE FROM runs WHERE run_id = ?", [run_row["run_id"]])
        con.execute("INSERT INTO runs BY NAME SELECT * FROM run_row")
        con.unregister("run_row")
        create_views(con)
    return db_path


def read_rows_in(staging_dir: Path, name: str) -> int:
    path = staging_dir / name
    if not path.exists():
        raise AccountingError(f"the pipeline left no count of rows read ({path}); the run did not complete")
    return int(path.read_text().strip() or 0)


def finalize(
    dest: Path,
    staging_dir: Path,
    staged_schemas: dict,
    rows_in: int,
    run_row: dict,
    k: int,
    rows_read: int | None = None,
    files: tuple[str, ...] | None = None,
    learnable_file: bool = True,
) -> dict:
    """Consolidate, check, load into `dest`, the new output set's folder
    (output_set.OutputSet: nothing is current until it commits); returns
    the figures for the summary.
    `files` names the staged tables written to OUT (default all);
    `learnable_file` false leaves OUT/learnable.parquet as it is. Returns
    (figures, the consolidated tables), so no caller reads back a file it
    just wrote."""
    return_freed_memory()
    tables = {name: read_staged(staging_dir, name, schema) for name, schema in staged_schemas.items()}
    counts = check_accounting(rows_in, tables["results"], tables["quarantine"], rows_read)
    from tasksieve.pipeline.outputs.provenance import run_metadata

    learnable = write_files(dest, tables, files, learnable_file, run_metadata(run_row))
    results, attempts, costs = tables["results"], tables["attempts"], tables["costs"]
    sampled_tasks = pc.sum(pc.greater(pc.fill_null(results["n_attempts"], 0), 0)).as_py() or 0
    total_usd = pc.sum(costs["usd"]).as_py() or 0.0
    unpriced = pc.sum(pc.equal(costs["unit"], "unpriced")).as_py() or 0
    figures = {
        "rows_in": rows_in,
        **counts,
        "learnable_rows": learnable.num_rows,
        "sampled_tasks": sampled_tasks,
        "attempts": attempts.num_rows,
        "attempts_fixed_k": sampled_tasks * k,
        "total_usd": total_usd,
        "unpriced_tasks": unpriced,
        "usd_per_learnable": (total_usd / counts["learnable"]) if counts["learnable"] else None,
    }
    run_row = dict(
        run_row,
        **{f"n_{k_}": v for k_, v in counts.items()},
        rows_in=rows_in,
        attempts=attempts.num_rows,
        total_usd=total_usd,
        figures=json.dumps(figures),
    )
    load_duckdb(dest, run_row, tables)
    shutil.rmtree(staging_dir, ignore_errors=True)
    return figures, tables


def funnel_rows(out: Path, run_id: str) -> list[dict]:
    con = duckdb.connect(str(visible(out, "curation.duckdb")), read_only=True)
    try:
        cur = con.execute(
            "SELECT stage, rows_in, removed, rows_out FROM funnel WHERE run_id = ? ORDER BY stage_order", [run_id]
        )
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, r)) for r in cur.fetchall()]
    finally:
        con.close()


def _funnel_lines(out: Path, run_id: str, upto: str | None = None) -> list[str]:
    rows = funnel_rows(out, run_id)
    # Columns as wide as the largest count (a million-row pool needs 7 digits and a space).
    w = max([7] + [len(str(r[k])) + 1 for r in rows for k in ("rows_in", "rows_out")])
    lines = [f"run {run_id}", "", f"{'stage':<16}{'in':>{w}}{'removed':>9}{'out':>{w}}"]
    for r in rows:
        lines.append(f"{r['stage']:<16}{r['rows_in']:>{w}}{r['removed']:>9}{r['rows_out']:>{w}}")
        if r["stage"] == upto:
            break
    return lines


DROPS_QUERY = "select drop_stage, drop_reason, task_id, drop_detail from drops"


def duckdb_command(db: Path, query: str) -> str:
    """A shell command that runs `query` on `db` with this Python's duckdb
    package (installed with tasksieve; a `duckdb` program usually is not)."""
    import shlex

    code = f"import duckdb; print(duckdb.connect({str(db)!r}, read_only=True).sql({query!r}))"
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}"


def dedup_summary_text(out: Path, run_id: str, fig: dict) -> str:
    """The summary of `tasksieve dedup`: the funnel up to decontamination."""
    lines = _funnel_lines(out, run_id, upto="decontaminate")
    lines += [
        "",
        f"kept {fig['kept']}  dropped {fig['dropped']}  quarantined {fig['quarantined']}",
        *([f"code sandbox: {fig['sandbox']}"] if fig.get("sandbox") else []),
        f"row accounting: rows_in {fig['rows_in']} == kept {fig['kept']} + dropped {fig['dropped']} + "
        f"quarantined {fig['quarantined']}  OK",
        "",
        f"outputs in {out}: results.parquet quarantine.parquet costs.parquet curation.duckdb",
        f"evidence: {duckdb_command(out / 'curation.duckdb', DROPS_QUERY)}",
    ]
    return "\n".join(lines)


def summary_text(out: Path, run_id: str, fig: dict) -> str:
    lines = _funnel_lines(out, run_id)
    saved = fig["attempts_fixed_k"] - fig["attempts"]
    per = f"${fig['usd_per_learnable']:.4f}" if fig["usd_per_learnable"] is not None else "n/a (no learnable task)"
    lines += [
        "",
        f"learnable {fig['learnable']}  all_pass {fig['all_pass']}  all_fail {fig['all_fail']}  "
        f"dropped {fig['dropped']}  quarantined {fig['quarantined']}",
        f"attempts used {fig['attempts']} vs {fig['attempts_fixed_k']} with fixed k (saved {saved})"
        + (
            f"; {fig['attempts_reused']} re-used from the attempt cache, {fig['attempts_generated']} generated"
            if fig.get("attempts_reused")
            else ""
        )
        + (
            f"; engine busy {fig['engine_busy_fraction']:.0%} of the sampling stage"
            if fig.get("engine_busy_fraction") is not None
            else ""
        ),
        f"total spend ${fig['total_usd']:.4f}  cost per learnable task {per}"
        + (f"  ({fig['unpriced_tasks']} tasks unpriced)" if fig["unpriced_tasks"] else ""),
        *([f"code sandbox: {fig['sandbox']}"] if fig.get("sandbox") else []),
        *([fig["judge_line"]] if fig.get("judge_line") else []),
        f"row accounting: rows_in {fig['rows_in']} == learnable {fig['learnable']} + all_pass {fig['all_pass']} + "
        f"all_fail {fig['all_fail']} + dropped {fig['dropped']} + quarantined {fig['quarantined']}  OK",
        "",
        f"outputs in {out}: learnable.parquet results.parquet attempts.parquet quarantine.parquet costs.parquet curation.duckdb",
        f"where the money went: tasksieve report {out}",
    ]
    return "\n".join(lines)
