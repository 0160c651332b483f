"""Stage `read`: deliveries in, one raw row per record out.

Reads JSONL, Parquet and saved Hugging Face `datasets` folders. A record that
cannot even be parsed (bad JSON, invalid UTF-8, a truncated last line, a row
over the size limit, a JSON value that is not an object) still becomes a raw
row, with `error` set, so the validate stage quarantines it: nothing read is
ever dropped silently.

A raw row is a dict: source_file, line (1-based line for JSONL, 1-based row
number for tables), record (the parsed dict, or None), raw (the text as read,
capped), error (None, or why the row is unusable).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import apache_beam as beam

# What we keep of an unusable row's raw text, so quarantine stays small.
RAW_KEEP_CHARS = 2000

TABLE_SUFFIXES = (".parquet",)
JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")


class InputError(Exception):
    """An input path that cannot be read at all; fails the run before it starts."""


def is_datasets_folder(path: Path) -> bool:
    return path.is_dir() and (
        (path / "dataset_info.json").exists()
        or (path / "state.json").exists()
        or (path / "dataset_dict.json").exists()
    )


def expand_inputs(paths: list[str]) -> list[str]:
    """Resolve the user's input paths to readable sources, failing fast.

    A file is read as JSONL or Parquet by its suffix; a saved `datasets`
    folder is one source; any other folder contributes its JSONL and Parquet
    files. The result is sorted so runs are deterministic.
    """
    out: list[str] = []
    for raw in paths:
        p = Path(raw)
        if not p.exists():
            raise InputError(f"input not found: {raw}")
        if p.is_file():
            if not p.name.endswith(TABLE_SUFFIXES + JSONL_SUFFIXES):
                raise InputError(f"input {raw}: unknown format (expected .jsonl, .json, .parquet or a datasets folder)")
            out.append(str(p))
        elif is_datasets_folder(p):
            out.append(str(p))
        else:
            found = _scan_folder(p)
            if not found:
                raise InputError(f"input folder {raw} holds no .jsonl/.parquet files and is not a datasets folder")
            out.extend(found)
    return sorted(dict.fromkeys(out))


def _scan_folder(folder: Path) -> list[str]:
    """Delivery files below a folder; a saved datasets folder counts as one."""
    found = []
    for child in sorted(folder.iterdir()):
        if child.is_dir():
            found.extend([str(child)] if is_datasets_folder(child) else _scan_folder(child))
        elif child.name.endswith(TABLE_SUFFIXES + JSONL_SUFFIXES):
            found.append(str(child))
    return found


def _raw_row(source_file: str, line: int, record, raw: str, error: str | None) -> dict:
    return {"source_file": source_file, "line": line, "record": record, "raw": raw[:RAW_KEEP_CHARS], "error": error}


def read_jsonl(path: str, max_row_bytes: int) -> Iterator[dict]:
    with open(path, "rb") as fh:
        data = fh.read()
    lines = data.split(b"\n")
    ends_with_newline = data.endswith(b"\n")
    if ends_with_newline:
        lines = lines[:-1]
    for i, bline in enumerate(lines, start=1):
        if not bline.strip():
            continue  # blank lines are layout, not rows
        is_last = i == len(lines)
        if len(bline) > max_row_bytes:
            yield _raw_row(path, i, None, bline[:RAW_KEEP_CHARS].decode("utf-8", "replace"),
                           f"row is {len(bline)} bytes, over the {max_row_bytes}-byte limit")
            continue
        try:
            text = bline.decode("utf-8")
        except UnicodeDecodeError as e:
            yield _raw_row(path, i, None, bline.decode("utf-8", "replace"),
                           f"invalid UTF-8 at byte {e.start} of the line; re-export the file as UTF-8")
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError as e:
            if is_last and not ends_with_newline:
                reason = f"truncated last line (file ends mid-record): {e.msg} at column {e.colno}"
            else:
                reason = f"malformed JSON: {e.msg} at column {e.colno}"
            yield _raw_row(path, i, None, text, reason)
            continue
        if not isinstance(record, dict):
            yield _raw_row(path, i, None, text, f"row is a JSON {type(record).__name__}, expected an object")
            continue
        yield _raw_row(path, i, record, text, None)


def _table_rows(path: str, batches, max_row_bytes: int) -> Iterator[dict]:
    n = 0
    for batch in batches:
        for record in batch.to_pylist():
            n += 1
            raw = json.dumps(record, default=str, ensure_ascii=False)
            if len(raw.encode("utf-8")) > max_row_bytes:
                yield _raw_row(path, n, None, raw, f"row is over the {max_row_bytes}-byte limit")
            else:
                yield _raw_row(path, n, record, raw, None)


def read_parquet(path: str, max_row_bytes: int) -> Iterator[dict]:
    import pyarrow.parquet as pq

    yield from _table_rows(path, pq.ParquetFile(path).iter_batches(batch_size=4096), max_row_bytes)


def read_datasets_folder(path: str, max_row_bytes: int) -> Iterator[dict]:
    import datasets

    loaded = datasets.load_from_disk(path)
    parts = loaded.items() if isinstance(loaded, datasets.DatasetDict) else [(None, loaded)]
    for split, ds in parts:
        label = f"{path}#{split}" if split else path
        yield from _table_rows(label, ds.data.to_batches(max_chunksize=4096), max_row_bytes)


def read_source(path: str, max_row_bytes: int) -> Iterator[dict]:
    """Every raw row of one source. An unreadable file becomes one raw row
    with an error rather than an exception, so one bad file among many is
    quarantined and the others are still curated."""
    p = Path(path)
    try:
        if p.is_dir():
            yield from read_datasets_folder(path, max_row_bytes)
        elif p.name.endswith(TABLE_SUFFIXES):
            yield from read_parquet(path, max_row_bytes)
        else:
            yield from read_jsonl(path, max_row_bytes)
    except Exception as e:  # a corrupt file: report it, keep the run going
        yield _raw_row(path, 0, None, "", f"cannot read file: {type(e).__name__}: {e}")


class ReadDeliveries(beam.PTransform):
    """Paths in, raw rows out. One element per source file: sources are read
    whole by one worker, which keeps line numbers exact."""

    def __init__(self, paths: list[str], max_row_bytes: int):
        super().__init__()
        self.paths = paths
        self.max_row_bytes = max_row_bytes

    def expand(self, pbegin):
        return (
            pbegin
            | "Paths" >> beam.Create(self.paths)
            # Spread files across workers before reading them.
            | "Spread" >> beam.Reshuffle()
            | "Read" >> beam.FlatMap(read_source, self.max_row_bytes)
        )
