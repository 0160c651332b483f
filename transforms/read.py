"""Stage `read`: deliveries in, one raw row per record out.

Reads JSONL (optionally compressed: `.gz`, `.bz2`, `.xz`), Parquet and saved
Hugging Face `datasets` folders. A record that cannot be used as read (bad
JSON, invalid UTF-8, a truncated last line, a row over the size limit, a
JSON value that is not an object, nesting too deep, a number too long, a lone
surrogate, a Parquet value that does not decode) still becomes a raw row,
with `error` set, so the validate stage quarantines it: nothing read is ever
dropped silently, and nothing a row contains raises out of this module.

Rows are also counted on their own (`count_rows`): physical lines for JSONL,
row-group row counts for Parquet and datasets, before any row is parsed.
That count is the independent side of the run's row-accounting check, so a
reader that skipped something fails the check instead of hiding it.

Before any row, each source gets a verdict (`source_verdict`,
sources/guard.py): its work must fit a budget set by its size on disk and
what it declares about itself must be true (sources/tables.py for Parquet and
datasets folders). A source refused is one error row, counted as one.
Which paths are sources is sources/inputs.py's (`expand_inputs`, re-exported).

A raw row is a dict: source_file, line (1-based line for JSONL, 1-based row
number for tables), record (the parsed dict, or None), raw (the text as read,
capped), error (None, or why the row is unusable, capped).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterator

import apache_beam as beam

from tasksieve.transforms.sources.inputs import (
    COMPRESSIONS,
    JSONL_SUFFIXES,  # noqa: F401
    READABLE,  # noqa: F401
    TABLE_SUFFIXES,  # noqa: F401
    UNREAD_COMPRESSIONS,  # noqa: F401
    InputError,  # noqa: F401
    delivery_kind,
    expand_inputs,  # noqa: F401
    is_datasets_folder,  # noqa: F401
)
from tasksieve.transforms.sources.values import (
    MAX_DEPTH,  # noqa: F401
    MAX_NUMBER_DIGITS,  # noqa: F401
    RAW_KEEP_CHARS,  # noqa: F401
    REASON_MAX_CHARS,  # noqa: F401
    LongNumber,  # noqa: F401
    RowLimitError,
    cap,
    check_value,  # noqa: F401
    loads_limited,
)
from tasksieve.transforms.sources.values import raw_row as _raw_row
from tasksieve.schemas.regular_file import SourceRefused, open_regular
from tasksieve.transforms.sources.guard import Capped, budget_for, expansion_reason, rows_reason, verdict

_BOM = b"\xef\xbb\xbf"
_CHUNK = 1 << 20

# --- opening files safely ------------------------------------------------------------------


def _open_jsonl(path: str):
    """A binary reader of a JSONL file's text: a plain file read up to its
    size when opened (a file that grows while read is not endless), a
    compressed one decompressed up to its budget (sources/guard.py)."""
    fh = open_regular(path)
    size = os.fstat(fh.fileno()).st_size
    low = path.lower()
    for comp, opener in COMPRESSIONS.items():
        if low.endswith(comp):
            budget = budget_for(size)
            return Capped(
                opener(fh, "rb"),
                budget.bytes,
                lambda: expansion_reason("it decompresses to", size, budget),
                size,
                compressed=True,
            )
    return Capped(fh, size, lambda: f"the file grew past its {size:,} bytes while it was read", size)


_UTF16_32_BOMS = {
    b"\xff\xfe\x00\x00": "UTF-32",
    b"\x00\x00\xfe\xff": "UTF-32",
    b"\xff\xfe": "UTF-16",
    b"\xfe\xff": "UTF-16",
}


def _not_utf8_text(head: bytes) -> str | None:
    """Why a JSONL file is not UTF-8 text at all, from its first bytes: a
    UTF-16/32 byte-order mark, or NUL bytes between most characters (no
    JSON line holds a raw NUL): every line would be quarantined alone."""
    for bom, name in _UTF16_32_BOMS.items():
        if head.startswith(bom):
            return f"the file is {name} (it starts with a {name} byte-order mark); re-export it as UTF-8"
    sample = head[:4096]
    if len(sample) >= 16 and sample.count(0) * 4 > len(sample):
        return "the file looks like UTF-16 or UTF-32 (NUL bytes between its characters); re-export it as UTF-8"
    return None


def check_jsonl(path: str) -> None:
    """A JSONL source's verdict (sources.guard.verdict): a regular file; if
    compressed, one pass that decompresses it within its budget of bytes
    and lines, so a bomb is refused whole before any row is read."""
    with _open_jsonl(path) as fh:
        chunk = fh.read(_CHUNK)
        why = _not_utf8_text(chunk)
        if why:
            raise SourceRefused(why)
        if not fh.compressed:
            return None
        size = fh.size
        budget = budget_for(size)
        lines = 0
        while True:
            if not chunk:
                return None
            lines += max(chunk.count(b"\n"), chunk.count(b"\r"))
            if lines > budget.rows:
                raise SourceRefused(rows_reason(lines, size, budget, what="decompresses to over"))
            chunk = fh.read(_CHUNK)


def source_verdict(path: str) -> tuple[str | None, int | None]:
    """(why the source is refused whole, or None; its rows if the check
    counted them): sources.guard.verdict with this source's check."""
    p = Path(path)
    if p.is_dir():
        from tasksieve.transforms.sources.tables import check_datasets_folder

        return verdict(path, check_datasets_folder)
    if delivery_kind(p.name) == "parquet":
        from tasksieve.transforms.sources.tables import check_parquet

        return verdict(path, check_parquet)
    return verdict(path, check_jsonl)


# --- physical lines ----------------------------------------------------------------------


def _line_end(chunk: bytes) -> bytes | None:
    """The line end of a file, from the first stretch of it with one: CR
    alone only when that stretch has no LF at all; otherwise LF (CRLF's CR
    is dropped from each line). None: no line end yet."""
    has_n, has_r = b"\n" in chunk, b"\r" in chunk
    if not (has_n or has_r):
        return None
    return b"\r" if has_r and not has_n else b"\n"


def physical_lines(fh, max_row_bytes: int) -> Iterator[tuple[int, bytes, int, bool]]:
    """(line number, bytes, full length, ends with a line break) per physical
    line. Line ends are LF, CRLF, or CR alone: the first line end of the
    file decides. A leading UTF-8 BOM is dropped. A line longer than
    `max_row_bytes` is not held in memory: its first bytes are kept and its
    full length reported. Blank lines are reported too (`is_blank`)."""
    sep: bytes | None = None
    kept, length, lineno, first = bytearray(), 0, 0, True

    def add(part: bytes) -> None:
        nonlocal length
        collecting = length <= max_row_bytes
        length += len(part)
        if collecting:
            kept.extend(part)
            if length > max_row_bytes:  # over the limit: keep only a preview
                del kept[RAW_KEEP_CHARS * 4 :]

    def emit(terminated: bool):
        nonlocal kept, length, lineno
        lineno += 1
        data = bytes(kept)
        full = length
        if sep == b"\n" and data.endswith(b"\r") and full <= max_row_bytes:
            data, full = data[:-1], full - 1  # CRLF
        kept, length = bytearray(), 0
        return lineno, data, full, terminated

    while True:
        chunk = fh.read(_CHUNK)
        if not chunk:
            break
        if first:
            first, chunk = False, chunk.removeprefix(_BOM)
        if sep is None:
            sep = _line_end(chunk)
            if sep is None:
                add(chunk)
                continue
        parts = chunk.split(sep)
        if len(parts) > 1:  # the line carried from the last chunk ends here
            add(parts[0])
            yield emit(True)
        # Lines wholly inside this chunk and under the limit (almost all):
        # what add() and emit() would give, without their copies and calls.
        crlf = sep == b"\n"
        for part in parts[1:-1]:
            if len(part) > max_row_bytes:
                add(part)
                yield emit(True)
                continue
            lineno += 1
            if crlf and part.endswith(b"\r"):
                yield lineno, part[:-1], len(part) - 1, True
            else:
                yield lineno, part, len(part), True
        add(parts[-1])
    if length:
        yield emit(False)


def is_blank(data: bytes, full_length: int) -> bool:
    """Blank lines are layout, not rows (neither read nor counted)."""
    return full_length == len(data) and not data.strip()


# --- counting, independently of parsing ---------------------------------------------------


def count_rows(path: str, max_row_bytes: int = 1 << 62) -> int:
    """How many raw rows `read_source` must yield for this source, counted
    without parsing any row: non-blank physical lines of a JSONL file,
    row-group row counts of a Parquet file, table row counts of a datasets
    folder. A source that cannot be opened counts as one row (the reader
    yields one error row for it); one that breaks off mid-file counts its
    lines up to there plus one."""
    reason, rows = source_verdict(path)
    if reason is not None:
        return 1
    if rows is not None:
        return rows
    n = 0
    try:
        with _open_jsonl(path) as fh:
            for _, data, full, _ in physical_lines(fh, max_row_bytes):
                if not is_blank(data, full):
                    n += 1
    except Exception:
        n += 1
    return n


# --- JSONL ----------------------------------------------------------------------------------


def _parse_line(path: str, i: int, bline: bytes, full: int, terminated: bool, max_row_bytes: int) -> dict:
    """One non-blank physical line as a raw row; never raises."""
    preview = bline[: RAW_KEEP_CHARS * 4].decode("utf-8", "replace")
    if full > max_row_bytes:
        return _raw_row(path, i, None, preview, f"row is {full} bytes, over the {max_row_bytes}-byte limit")
    if bline.startswith(_BOM):
        bline = bline[len(_BOM) :]
    try:
        text = bline.decode("utf-8")
    except UnicodeDecodeError as e:
        return _raw_row(
            path, i, None, preview, f"invalid UTF-8 at byte {e.start} of the line; re-export the file as UTF-8"
        )
    try:
        record = loads_limited(text)
    except json.JSONDecodeError as e:
        kind = "truncated last line (file ends mid-record)" if not terminated else "malformed JSON"
        return _raw_row(path, i, None, text, f"{kind}: {e.msg} at column {e.colno}")
    except RowLimitError as e:
        return _raw_row(path, i, None, text, str(e))
    if not isinstance(record, dict):
        return _raw_row(path, i, None, text, f"row is a JSON {type(record).__name__}, expected an object")
    return _raw_row(path, i, record, text, None)


def read_jsonl(path: str, max_row_bytes: int) -> Iterator[dict]:
    """One raw row per non-blank physical line. A file that breaks off
    (a corrupt compressed stream, an I/O error) yields one error row for
    the rest, after the rows read up to there."""
    last = 0
    try:
        with _open_jsonl(path) as fh:
            for i, bline, full, terminated in physical_lines(fh, max_row_bytes):
                last = i
                if is_blank(bline, full):
                    continue
                yield _parse_line(path, i, bline, full, terminated, max_row_bytes)
    except Exception as e:
        what = "cannot read file" if last == 0 else f"cannot read the rest of the file after line {last}"
        yield _raw_row(path, last + 1 if last else 0, None, "", f"{what}: {type(e).__name__}: {cap(str(e), 150)}")


# --- every source --------------------------------------------------------------------------


def read_source(path: str, max_row_bytes: int) -> Iterator[dict]:
    """Every raw row of one source. An unreadable file becomes one raw row
    with an error rather than an exception, so one bad file among many is
    quarantined and the others are still curated."""
    reason, _ = source_verdict(path)
    if reason is not None:  # refused whole before any row is read: one row, counted as one
        yield _raw_row(path, 0, None, "", reason)
        return
    p = Path(path)
    if not p.is_dir() and delivery_kind(p.name) != "parquet":
        yield from read_jsonl(path, max_row_bytes)  # never raises
        return
    from tasksieve.transforms.sources.tables import read_datasets_folder, read_parquet

    yielded = False
    try:
        rows = read_datasets_folder(path, max_row_bytes) if p.is_dir() else read_parquet(path, max_row_bytes)
        for row in rows:
            yielded = True
            yield row
    except Exception as e:  # changed or damaged since it was checked: report it, keep the run going
        if yielded:
            # Rows already read stay; what is left is one error row (the
            # count then differs and the accounting check says so).
            yield _raw_row(
                path, 0, None, "", f"cannot read the rest of the file: {type(e).__name__}: {cap(str(e), 150)}"
            )
        else:
            yield _raw_row(path, 0, None, "", f"cannot read file: {type(e).__name__}: {cap(str(e), 150)}")


class CountInputRows(beam.PTransform):
    """Paths in, one number out: the rows the inputs hold, counted without
    parsing any of them (count_rows). The independent side of the
    row-accounting check."""

    def __init__(self, paths: list[str], max_row_bytes: int):
        super().__init__()
        self.paths = paths
        self.max_row_bytes = max_row_bytes

    def expand(self, pbegin):
        return (
            pbegin
            | "Paths" >> beam.Create(self.paths)
            | "Spread" >> beam.Reshuffle()
            | "Count" >> beam.Map(count_rows, self.max_row_bytes)
            | "Sum" >> beam.CombineGlobally(sum)
        )
