"""Where `tasksieve select` writes: under OUT's lock, into a new output set
(output_set.py) that becomes current in one step. A second `select`, or a
`run`/`dedup` into the same folder, refuses at once; a kill or a failure
leaves the earlier selection whole and current."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pyarrow as pa

from tasksieve.pipeline.outputs.output_set import DB, OutputSet
from tasksieve.pipeline.outputs.finalize import transaction, write_parquet_atomic


@contextlib.contextmanager
def held(out: Path, error: type[Exception]):
    """OUT's lock (the one `run` and `dedup` take) for the whole command; a
    folder in use raises `error` with the one line that says by whom."""
    from tasksieve.pipeline.run.errors import RunError
    from tasksieve.pipeline.run.folders import hold_output

    lock = hold_output(out, "select")
    try:
        lock.__enter__()
    except RunError as e:
        raise error(str(e)) from None
    try:
        yield out
    finally:
        lock.__exit__(None, None, None)


def _append(con, name: str, table: pa.Table) -> None:
    con.register("src", table)
    con.execute(f"CREATE TABLE IF NOT EXISTS {name} AS SELECT * FROM src LIMIT 0")
    con.execute(f"INSERT INTO {name} BY NAME SELECT * FROM src")
    con.unregister("src")


def write_selection(out: Path, selected: pa.Table, tables: dict[str, pa.Table], sid: str) -> None:
    """selected.parquet and the tables `selection`, `selection_clusters`
    and `selections`, committed together."""
    with OutputSet(out, sid) as outset:
        write_parquet_atomic(selected, outset.path("selected.parquet"))
        with transaction(outset.path(DB)) as con:
            for name, table in tables.items():
                _append(con, name, table)
        outset.commit()
