"""The reference-pool index for `--dedup-against`: an earlier stage's
tasks (last quarter's training set, say), hashed once and saved, so a
large pool is not re-hashed on every run.

An index is a folder:
- `meta.json`: format version, the MinHash parameters it was built with,
  the pool paths, and the row count;
- `pool.parquet`: one row per pool task: `node` (join id, unique in the
  index: see _unique_node), `source`,
  `task_id`, `pool` (the file it came from), `content_hash` (as
  `normalize.content_hash`), `text` (normalised prompt, for the
  confirming similarity) and `bands` (the LSH band keys).

Pool files are only ever read. A pool row that the delivery validator
would quarantine still counts when it has a prompt (a duplicate of it is
still a duplicate); rows without a prompt cannot match and are counted as
`unusable` in meta.json. The index is written in batches: building it
never holds the pool in memory.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from tasksieve.transforms.dedup.near_judge import pool_node
from tasksieve.transforms.dedup.minhash import MinHashParams, task_bands, text_of
from tasksieve.transforms.normalize import content_hash
from tasksieve.transforms.read import expand_inputs, read_source
from tasksieve.transforms.validate import validate_row

# /2: node ids are unique in the index (_unique_node); a /1 index may give two
# pool tasks one id, so it is refused and must be rebuilt.
FORMAT = "tasksieve-pool-index/2"
META = "meta.json"
ROWS = "pool.parquet"
SCHEMA = pa.schema(
    [
        pa.field("node", pa.string()),
        pa.field("source", pa.string()),
        pa.field("task_id", pa.string()),
        pa.field("pool", pa.string()),
        pa.field("content_hash", pa.string()),
        pa.field("text", pa.string()),
        pa.field("bands", pa.list_(pa.int64())),
    ]
)
_BATCH = 4096


class PoolIndexError(Exception):
    """An index that cannot be used; the message is one line for a person."""


def is_index(path: str | Path) -> bool:
    return (Path(path) / META).is_file() and (Path(path) / ROWS).is_file()


def _pool_task(raw: dict, max_field_chars: int) -> dict | None:
    task, _ = validate_row(raw, max_field_chars)
    if task is not None:
        return task
    rec = raw.get("record") or {}
    prompt = rec.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        return None  # nothing to match on
    ans = rec.get("answer")
    return {
        "task_id": str(rec.get("task_id", raw["line"])),
        "source": str(rec.get("source") or Path(raw["source_file"]).stem),
        "domain": "code" if rec.get("tests") else "math",
        "prompt": prompt,
        "answer": None if ans is None else str(ans),
        "tests": rec.get("tests") if isinstance(rec.get("tests"), str) else None,
    }


def _hash8(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()


def _unique_node(node: str, seen: set, last: dict) -> str:
    """`node`, or if the index already holds it, `node` + "\x1f#k" for the
    first free k. Two pool files (last quarter's set and the one before)
    often reuse a source and its task ids, and one id for two tasks made the
    later row stand in for both: an exact copy of the earlier one was then
    kept. The first occurrence keeps the plain id, so pools without a repeat
    are indexed as before. `seen` holds 8-byte hashes of the ids given out
    (a pool of millions stays small): a hash collision only costs a suffix,
    and an id equal to one given out always has its hash there, so no id is
    given out twice, whatever the ids spell. `last` remembers the last k of
    each repeated id, so a pool of one id repeated n times costs n tries,
    not n squared."""
    base = _hash8(node)
    if base not in seen:
        seen.add(base)
        return node
    k = last.get(base, 1)
    while True:
        k += 1
        h = _hash8(candidate := f"{node}\x1f#{k}")
        if h not in seen:
            seen.add(h)
            last[base] = k
            return candidate


def pool_rows(
    paths: list[str],
    p: MinHashParams,
    max_row_bytes: int = 10_000_000,
    max_field_chars: int = 1_000_000,
    counts: dict | None = None,
) -> Iterator[dict]:
    counts = counts if counts is not None else {}
    seen: set = set()
    last: dict = {}
    for path in expand_inputs(paths):
        for raw in read_source(path, max_row_bytes):
            task = _pool_task(raw, max_field_chars)
            if task is None:
                counts["unusable"] = counts.get("unusable", 0) + 1
                continue
            counts["rows"] = counts.get("rows", 0) + 1
            yield {
                "node": _unique_node(pool_node(task), seen, last),
                "source": task["source"],
                "task_id": task["task_id"],
                "pool": path,
                "content_hash": content_hash(task),
                "text": text_of(task),
                "bands": [k for _, k in task_bands(task, p)],
            }


def build_index(paths: list[str], p: MinHashParams, out_dir: str | Path) -> dict:
    """Hash the pool into OUT_DIR (replacing an index there); returns meta."""
    out = Path(out_dir)
    if out.exists():
        if not is_index(out) and any(out.iterdir()):
            raise PoolIndexError(f"{out} exists and is not a tasksieve pool index; choose another --save-index path")
        shutil.rmtree(out)
    out.mkdir(parents=True)
    counts: dict = {}
    with pq.ParquetWriter(out / ROWS, SCHEMA) as writer:
        batch = []
        for row in pool_rows(paths, p, counts=counts):
            batch.append(row)
            if len(batch) >= _BATCH:
                writer.write_table(pa.Table.from_pylist(batch, SCHEMA))
                batch = []
        if batch:
            writer.write_table(pa.Table.from_pylist(batch, SCHEMA))
    meta = {
        "format": FORMAT,
        "params": p.as_dict(),
        "paths": [str(x) for x in paths],
        "rows": counts.get("rows", 0),
        "unusable": counts.get("unusable", 0),
    }
    (out / META).write_text(json.dumps(meta, indent=2, sort_keys=True))
    return meta


def load_meta(path: str | Path, p: MinHashParams) -> dict:
    """The index's meta, checked against the run's MinHash parameters."""
    try:
        meta = json.loads((Path(path) / META).read_text())
    except (OSError, ValueError) as e:
        raise PoolIndexError(f"cannot read pool index {path}: {e}") from None
    if meta.get("format") != FORMAT:
        raise PoolIndexError(
            f"{path} is not a {FORMAT} index (format {meta.get('format')!r}); "
            "rebuild it from the pool files (tasksieve dedup ... --save-index)"
        )
    if meta.get("params") != p.as_dict():
        raise PoolIndexError(
            f"pool index {path} was built with {meta.get('params')}, but this run uses {p.as_dict()}; "
            "rebuild it (tasksieve dedup ... --save-index) or match [dedup] to it"
        )
    return meta


def index_row_groups(path: str) -> list[tuple[str, int]]:
    """(file, row group) pairs: the units the pipeline reads in parallel."""
    f = str(Path(path) / ROWS)
    return [(f, i) for i in range(pq.ParquetFile(f).num_row_groups)]


def read_row_group(unit: tuple[str, int]) -> Iterator[dict]:
    f, i = unit
    yield from pq.ParquetFile(f).read_row_group(i).to_pylist()
