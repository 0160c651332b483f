"""Reading tables: Parquet files and saved `datasets` folders, each checked
before it is read (guard.py says why).

Parquet: the footer is checked against the file's size (row counts, column
chunks inside the file, declared sizes within the budget), then every row
group is decoded once to check that it holds the rows it declares and that
its data passes pyarrow's full validation, with dictionary-encoded text
kept as dictionaries so a value repeated a million times is not expanded.

datasets folders are read without the `datasets` library and without
memory-mapping: `dataset_dict.json` names the splits, each split's
`state.json` names its Arrow stream files, which must be plain files inside
the folder; each record batch is read from the file and fully validated
(offsets, lengths, dictionary indices) before any value is touched. A
damaged Arrow file made `datasets.load_from_disk` + `to_pylist` crash the
process (SIGSEGV); validated batches raise instead. `dataset_info.json`
(sizes, counts, features) is never trusted or used: rows are counted from
the Arrow data itself.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterator

import pyarrow as pa

from tasksieve.transforms.sources.values import RAW_KEEP_CHARS, RowLimitError, cap, check_value
from tasksieve.transforms.sources.values import raw_row as _raw_row
from tasksieve.schemas.regular_file import SourceRefused, open_regular
from tasksieve.transforms.sources.guard import MAX_META_BYTES, budget_for, expansion_reason, rows_reason

BATCH_ROWS = 4096
DECODE_BYTES = 64 << 20  # dictionary text expanded at once, at most (a batch is split until under it)


# --- validation before use --------------------------------------------------------------------


def _binary_type(t: pa.DataType) -> pa.DataType:
    """`t` with every text type as its binary twin (the same layout), so a
    full validation checks offsets and lengths but leaves invalid UTF-8 to
    the row it is in (one row quarantined, not the file)."""
    if pa.types.is_string(t):
        return pa.binary()
    if pa.types.is_large_string(t):
        return pa.large_binary()
    if pa.types.is_string_view(t):
        return pa.binary_view()
    if pa.types.is_dictionary(t):
        return pa.dictionary(t.index_type, _binary_type(t.value_type), t.ordered)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        f = t.value_field
        field = pa.field(f.name, _binary_type(f.type), f.nullable)
        if pa.types.is_fixed_size_list(t):
            return pa.list_(field, t.list_size)
        return pa.list_(field) if pa.types.is_list(t) else pa.large_list(field)
    if pa.types.is_map(t):
        return pa.map_(_binary_type(t.key_type), _binary_type(t.item_type), t.keys_sorted)
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _binary_type(f.type), f.nullable) for f in t])
    return t


def validate_batch(batch: pa.RecordBatch) -> None:
    """Raise SourceRefused unless every buffer, offset, length and
    dictionary index of `batch` is consistent (pyarrow's full validation;
    text is checked as bytes)."""
    for name, col in zip(batch.schema.names, batch.columns):
        try:
            col.view(_binary_type(col.type)).validate(full=True)
        except pa.ArrowNotImplementedError:
            col.validate(full=True)  # a type with no binary twin: validated as it is
        except Exception as e:
            raise SourceRefused(
                f"column '{cap(name, 60)}' is damaged ({type(e).__name__}: {cap(str(e), 120)}); "
                "the file is corrupt, re-export it"
            ) from None


def decoded_bytes(batch) -> int:
    """Bytes the batch's values take once decoded: its buffers, with each
    dictionary column counted as its values repeated per row (what
    to_pylist would build), not as the dictionary once."""
    import pyarrow.compute as pc

    total = 0
    for col in batch.columns:
        chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
        for arr in chunks:
            if pa.types.is_dictionary(arr.type) and (
                pa.types.is_binary(arr.type.value_type)
                or pa.types.is_string(arr.type.value_type)
                or pa.types.is_large_string(arr.type.value_type)
                or pa.types.is_large_binary(arr.type.value_type)
            ):
                lengths = pc.binary_length(arr.dictionary.view(_binary_type(arr.dictionary.type)))
                total += int(pc.sum(pc.take(lengths, arr.indices)).as_py() or 0) + arr.indices.nbytes
            else:
                total += arr.nbytes
    return total


# --- rows of a batch ----------------------------------------------------------------------------


def _dumps_raw(record) -> str:
    try:
        return json.dumps(record, default=str, ensure_ascii=False)
    except Exception:
        return cap(repr(record), RAW_KEEP_CHARS)


def _table_row(path: str, n: int, record, max_row_bytes: int) -> dict:
    if not isinstance(record, dict):
        return _raw_row(path, n, None, _dumps_raw(record), f"row is a {type(record).__name__}, expected a record")
    try:
        check_value(record)
    except RowLimitError as e:
        return _raw_row(path, n, None, _dumps_raw(record)[:RAW_KEEP_CHARS], str(e))
    raw = _dumps_raw(record)
    size = len(raw.encode("utf-8", "replace"))
    if size > max_row_bytes:
        return _raw_row(path, n, None, raw, f"row is {size} bytes, over the {max_row_bytes}-byte limit")
    return _raw_row(path, n, record, raw, None)


def _undecodable_raw(batch_row) -> str:
    """What a row that does not decode holds, with its text columns shown as
    bytes (their invalid UTF-8 replaced)."""
    try:
        cols = {}
        for name, col in zip(batch_row.schema.names, batch_row.columns):
            if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
                col = col.cast(pa.binary() if pa.types.is_string(col.type) else pa.large_binary())
            try:
                v = col.to_pylist()[0]
            except Exception:
                v = "<undecodable>"
            cols[name] = v.decode("utf-8", "replace") if isinstance(v, bytes) else v
        return _dumps_raw(cols)
    except Exception:
        return ""


def _decode_error(batch_row) -> str:
    """Which column of a one-row batch does not decode, and why."""
    for name, col in zip(batch_row.schema.names, batch_row.columns):
        try:
            col.to_pylist()
        except UnicodeDecodeError as e:
            return f"invalid UTF-8 in column '{cap(name, 60)}' at byte {e.start}; re-export the file as UTF-8"
        except Exception as e:
            return f"column '{cap(name, 60)}' does not decode: {type(e).__name__}: {cap(str(e), 120)}"
    return "row does not decode"


def _dictionary_row_bytes(batch):
    """Per row, the bytes its dictionary-encoded text columns decode to
    (None if it has none): a row over the limit is refused before a huge
    dictionary value is copied into it."""
    import pyarrow.compute as pc

    sizes = None
    for col in batch.columns:
        if pa.types.is_dictionary(col.type):
            lengths = (
                pc.binary_length(col.dictionary.view(_binary_type(col.dictionary.type)))
                if not pa.types.is_integer(col.dictionary.type)
                else None
            )
            if lengths is None:
                continue
            per_row = pc.fill_null(pc.take(lengths, col.indices), 0).to_numpy(zero_copy_only=False)
            sizes = per_row if sizes is None else sizes + per_row
    return sizes


def batch_rows(path: str, batch, first: int, max_row_bytes: int) -> Iterator[dict]:
    """Raw rows of one validated record batch (row numbers from `first`).
    A row whose values do not decode (invalid UTF-8 in a string column,
    say) is an error row on its own; the batch's other rows are read."""
    sizes = _dictionary_row_bytes(batch)
    if sizes is not None:
        if sizes.max(initial=0) > max_row_bytes:
            for j in range(batch.num_rows):
                if sizes[j] > max_row_bytes:
                    yield _raw_row(
                        path,
                        first + j,
                        None,
                        "",
                        f"row is over {int(sizes[j])} bytes, over the {max_row_bytes}-byte limit",
                    )
                else:
                    yield from batch_rows(path, batch.slice(j, 1), first + j, max_row_bytes)
            return
        if batch.num_rows > 1 and int(sizes.sum()) > DECODE_BYTES:  # expanded in parts of bounded size
            half = batch.num_rows // 2
            yield from batch_rows(path, batch.slice(0, half), first, max_row_bytes)
            yield from batch_rows(path, batch.slice(half), first + half, max_row_bytes)
            return
        # Dense before to_pylist: a dictionary column converts value by value (2-3x slower).
        batch = pa.RecordBatch.from_arrays(
            [c.dictionary_decode() if pa.types.is_dictionary(c.type) else c for c in batch.columns],
            names=batch.schema.names,
        )
    try:
        records = batch.to_pylist()
    except Exception:
        records = None
    if records is not None:
        for j, record in enumerate(records):
            yield _table_row(path, first + j, record, max_row_bytes)
        return
    for j in range(batch.num_rows):
        one = batch.slice(j, 1)
        try:
            record = one.to_pylist()[0]
        except Exception:
            yield _raw_row(path, first + j, None, _undecodable_raw(one), _decode_error(one))
            continue
        yield _table_row(path, first + j, record, max_row_bytes)


# --- Parquet --------------------------------------------------------------------------------------


def _parquet_file(fh):
    """The ParquetFile of an open file, its footer checked against the
    file's size; text columns stored with a dictionary are read as
    dictionaries (decoded_bytes counts them as expanded)."""
    import pyarrow.parquet as pq

    size = os.fstat(fh.fileno()).st_size
    budget = budget_for(size)
    md = pq.ParquetFile(fh).metadata
    data_end = size - 8 - md.serialized_size
    groups = [md.row_group(g) for g in range(md.num_row_groups)]
    declared = [rg.num_rows for rg in groups]
    if any(n < 0 for n in declared) or sum(declared) != md.num_rows:
        raise SourceRefused(
            f"the file's metadata declares {md.num_rows:,} rows but its row groups "
            f"{cap(str(declared), 60)}: it is corrupt; it is not read"
        )
    if md.num_rows > budget.rows:
        raise SourceRefused(rows_reason(md.num_rows, size, budget))
    schema = md.schema
    unpacked = 0
    as_dictionary = set()
    for g, rg in enumerate(groups):
        for c in range(rg.num_columns):
            col, leaf = rg.column(c), schema.column(c)
            starts = [o for o in (col.dictionary_page_offset, col.data_page_offset) if o is not None]
            start = min(starts) if starts else -1
            if (
                start < 0
                or start >= max(data_end, 0)
                or col.total_compressed_size < 0
                or start + col.total_compressed_size > size
                or col.total_uncompressed_size < 0
            ):
                raise SourceRefused(
                    f"row group {g} column '{cap(leaf.path, 60)}' lies outside the file "
                    f"(offset {start:,}, {col.total_compressed_size:,} bytes, file "
                    f"{size:,} bytes): it is corrupt; it is not read"
                )
            if col.num_values < rg.num_rows or (leaf.max_repetition_level == 0 and col.num_values != rg.num_rows):
                raise SourceRefused(
                    f"row group {g} declares {rg.num_rows:,} rows but column "
                    f"'{cap(leaf.path, 60)}' {col.num_values:,} values: it is corrupt; it is not read"
                )
            unpacked += col.total_uncompressed_size
            if col.has_dictionary_page and leaf.physical_type == "BYTE_ARRAY" and "." not in leaf.path:
                as_dictionary.add(leaf.path)
    if unpacked > budget.bytes:
        raise SourceRefused(expansion_reason("its column data unpacks to", size, budget))
    return pq.ParquetFile(fh, read_dictionary=sorted(as_dictionary) or None)


def check_parquet(path: str) -> int:
    """The rows a Parquet file holds, after checking its footer and
    decoding each row group once (raises SourceRefused)."""
    with open_regular(path) as fh:
        size = os.fstat(fh.fileno()).st_size
        budget = budget_for(size)
        pf = _parquet_file(fh)
        decoded = 0
        for g in range(pf.num_row_groups):
            declared = pf.metadata.row_group(g).num_rows
            try:
                table = pf.read_row_group(g)
            except SourceRefused:
                raise
            except Exception as e:
                raise SourceRefused(
                    f"row group {g} of the file does not decode: {type(e).__name__}: "
                    f"{cap(str(e), 120)}; it is corrupt, re-export it"
                ) from None
            if table.num_rows != declared:
                raise SourceRefused(
                    f"row group {g} declares {declared:,} rows but holds {table.num_rows:,}: "
                    "the file's metadata is corrupt; it is not read"
                )
            for batch in table.to_batches(max_chunksize=BATCH_ROWS):
                validate_batch(batch)
                decoded += decoded_bytes(batch)
                if decoded > budget.bytes:
                    raise SourceRefused(expansion_reason("its values decode to", size, budget))
        return pf.metadata.num_rows


def read_parquet(path: str, max_row_bytes: int) -> Iterator[dict]:
    """Row group by row group, after check_parquet passed."""
    with open_regular(path) as fh:
        pf = _parquet_file(fh)
        n = 1
        for g in range(pf.num_row_groups):
            table = pf.read_row_group(g)
            if table.num_rows != pf.metadata.row_group(g).num_rows:  # changed since it was checked
                raise SourceRefused(f"row group {g} no longer holds the rows it declares")
            for batch in table.to_batches(max_chunksize=BATCH_ROWS):
                validate_batch(batch)
                yield from batch_rows(path, batch, n, max_row_bytes)
                n += batch.num_rows


# --- datasets folders -------------------------------------------------------------------------------


def _plain_name(name) -> bool:
    return (
        isinstance(name, str)
        and name not in ("", ".", "..")
        and "/" not in name
        and "\\" not in name
        and "\x00" not in name
    )


def _small_json(path: Path, what: str):
    try:
        fh = open_regular(str(path))
    except FileNotFoundError:
        raise SourceRefused(f"the datasets folder has no {what}; it is not read") from None
    except SourceRefused as e:
        raise SourceRefused(f"its {what} is {e}; it is not read") from None
    with fh:
        data = fh.read(MAX_META_BYTES + 1)
    if len(data) > MAX_META_BYTES:
        raise SourceRefused(f"its {what} is over {MAX_META_BYTES:,} bytes; it is not read")
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise SourceRefused(f"its {what} is not valid JSON ({type(e).__name__}); it is not read") from None


def _inside(path: Path, folder: Path) -> bool:
    real, top = os.path.realpath(path), os.path.realpath(folder)
    return real.startswith(top.rstrip("/") + "/")


def _arrow_files(folder: Path, top: Path, where: str) -> list[str]:
    state = _small_json(folder / "state.json", f"{where}state.json")
    files = state.get("_data_files") if isinstance(state, dict) else None
    if not isinstance(files, list) or not files:
        raise SourceRefused(f"its {where}state.json lists no data files (_data_files); it is not read")
    out = []
    for entry in files:
        name = entry.get("filename") if isinstance(entry, dict) else None
        if not _plain_name(name):
            raise SourceRefused(
                f"its {where}state.json names a data file {cap(repr(name), 80)} that is not a plain "
                "file name inside the folder; it is not read"
            )
        p = folder / name
        if not _inside(p, top):
            raise SourceRefused(f"its data file {where}{cap(name, 80)} is a link to outside the folder; it is not read")
        out.append(str(p))
    return out


def dataset_parts(path: str) -> list[tuple[str, list[str]]]:
    """(label, Arrow files) per split of a saved datasets folder, its JSON
    and file names checked (raises SourceRefused)."""
    top = Path(path)
    if os.path.lexists(top / "dataset_dict.json"):
        meta = _small_json(top / "dataset_dict.json", "dataset_dict.json")
        splits = meta.get("splits") if isinstance(meta, dict) else None
        if not isinstance(splits, list) or not splits or not all(_plain_name(s) for s in splits):
            raise SourceRefused("its dataset_dict.json does not list splits as plain folder names; it is not read")
        parts = []
        for split in splits:
            folder = top / split
            if not _inside(folder, top) or not folder.is_dir():
                raise SourceRefused(f"its split '{cap(split, 60)}' is not a folder inside it; it is not read")
            parts.append((f"{path}#{split}", _arrow_files(folder, top, f"{split}/")))
        return parts
    return [(path, _arrow_files(top, top, ""))]


def arrow_batches(file: str) -> Iterator[pa.RecordBatch]:
    """The record batches of an Arrow stream (or IPC file), read from the
    file, not memory-mapped, each validated before it is handed out."""
    with open_regular(file) as fh:
        head = fh.read(6)
        fh.seek(0)
        reader = pa.ipc.open_file(fh) if head == b"ARROW1" else pa.ipc.open_stream(fh)
        if isinstance(reader, pa.ipc.RecordBatchFileReader):
            batches = (reader.get_batch(i) for i in range(reader.num_record_batches))
        else:
            batches = iter(reader)
        for batch in batches:
            validate_batch(batch)
            yield batch


def check_datasets_folder(path: str) -> int:
    """The rows a datasets folder holds, every batch validated and counted
    against the budget of its files' size (raises SourceRefused)."""
    parts = dataset_parts(path)
    files = [f for _, fs in parts for f in fs]
    size = 0
    for f in files:
        try:
            fh = open_regular(f)
        except SourceRefused as e:
            raise SourceRefused(f"its data file {cap(os.path.relpath(f, path), 80)} is {e}; it is not read") from None
        with fh:  # every file a plain one before any is read
            size += os.fstat(fh.fileno()).st_size
    budget = budget_for(size)
    rows = decoded = 0
    for f in files:
        for batch in arrow_batches(f):
            rows += batch.num_rows
            decoded += decoded_bytes(batch)
            if rows > budget.rows:
                raise SourceRefused(rows_reason(rows, size, budget, what="holds over"))
            if decoded > budget.bytes:
                raise SourceRefused(expansion_reason("its values decode to", size, budget))
    return rows


def read_datasets_folder(path: str, max_row_bytes: int) -> Iterator[dict]:
    for label, files in dataset_parts(path):
        n = 1
        for f in files:
            for batch in arrow_batches(f):
                for part in batch.to_batches(max_chunksize=BATCH_ROWS) if isinstance(batch, pa.Table) else [batch]:
                    for start in range(0, part.num_rows, BATCH_ROWS):
                        piece = part.slice(start, BATCH_ROWS)
                        yield from batch_rows(label, piece, n, max_row_bytes)
                        n += piece.num_rows
