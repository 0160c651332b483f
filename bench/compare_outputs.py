"""Compare two output folders of the same job, table by table and row by row.

    .venv/bin/python bench/compare_outputs.py OUT_A OUT_B

Used to show a refactor changed nothing (issue 12): every Parquet output
and every DuckDB table is read, and values are compared after masking what
differs between any two runs of one job: run ids, wall-clock times and
durations, and the output folder's own path (it appears in `source_file`
and the run's `inputs`). Verification is priced by the CPU seconds it
measured, so cost rows in `cpu_second` (and the run's `total_usd`) are
durations too and are masked. Prints one line per table: identical, or the
columns that differ and how many rows.
"""

from __future__ import annotations

import sys
from pathlib import Path

import duckdb
import pyarrow.parquet as pq

# Differ between any two runs of one job (ids, clocks, durations).
VOLATILE = {
    "run_id",
    "reused_from_run",
    "started_at",
    "finished_at",
    "wall_seconds",
    "engine_seconds",
    "sampling_wall_seconds",
    "engine_busy_fraction",
    "gen_seconds",
    "verify_seconds",
    "judge_seconds",
    "figures",
    "selection_id",
    "created",
}
FILES = ("results", "learnable", "attempts", "quarantine", "costs")


def _mask(rows: list[dict], out: Path) -> list[dict]:
    prefix = str(out.resolve())
    masked = []
    for r in rows:
        m = {}
        for k, v in r.items():
            if k in VOLATILE or (r.get("unit") == "cpu_second" and k in ("quantity", "usd")) or k == "total_usd":
                continue
            m[k] = v.replace(prefix, "OUT").replace(str(out), "OUT") if isinstance(v, str) else v
        masked.append(m)
    return masked


def _diff(name: str, a: list[dict], b: list[dict]) -> str:
    if len(a) != len(b):
        return f"{name}: {len(a)} vs {len(b)} rows"
    cols = sorted({k for r in a for k in r} | {k for r in b for k in r})
    bad = {c: sum(1 for x, y in zip(a, b) if x.get(c) != y.get(c)) for c in cols}
    bad = {c: n for c, n in bad.items() if n}
    return f"{name}: {len(a)} rows identical" if not bad else f"{name}: differs in {bad}"


def _tables(out: Path) -> dict[str, list[dict]]:
    con = duckdb.connect(str(out / "curation.duckdb"), read_only=True)
    try:
        names = [
            r[0]
            for r in con.execute(
                "select table_name from information_schema.tables where table_type = 'BASE TABLE' order by 1"
            ).fetchall()
        ]
        out = {}
        for n in names:
            cur = con.execute(f'select * from "{n}"')
            cols = [d[0] for d in cur.description]
            out[n] = [dict(zip(cols, row)) for row in cur.fetchall()]
        return out
    finally:
        con.close()


def compare(a: Path, b: Path) -> list[str]:
    lines = []
    for f in FILES:
        pa_, pb = a / f"{f}.parquet", b / f"{f}.parquet"
        if pa_.exists() or pb.exists():
            lines.append(
                _diff(f"{f}.parquet", _mask(pq.read_table(pa_).to_pylist(), a), _mask(pq.read_table(pb).to_pylist(), b))
            )
    ta, tb = _tables(a), _tables(b)
    for n in sorted(set(ta) | set(tb)):
        lines.append(_diff(f"duckdb {n}", _mask(ta.get(n, []), a), _mask(tb.get(n, []), b)))
    return lines


if __name__ == "__main__":
    for line in compare(Path(sys.argv[1]), Path(sys.argv[2])):
        print(line)
