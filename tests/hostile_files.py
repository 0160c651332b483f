"""Damaged and lying input files, one function per kind, for
test_hostile_files.py and the end-to-end corpus of tests/hostile.py.

Each case writes one source into a folder and returns (name, expectation):
  ("refused", reason substring): the source is one quarantine row (line 0)
      with this reason, and counts as one row;
  ("rows", n, bad, reason substring): it is read as n rows, `bad` of them
      quarantined with this reason (bad = 0: reason None).
The lying files claim work their size cannot hold (a footer's row counts, a
compressed stream's expansion, a dictionary value repeated per row) or hold
damage that once crashed the reader (Arrow offsets past their buffers).
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import os
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ARROW = "data-00000-of-00001.arrow"


def rows(n: int, start: int = 0) -> list[dict]:
    return [
        {
            "task_id": f"lie-{start + i}",
            "prompt": f"Calculate {start + i + 3} + {start + i + 400}.",
            "answer": str(2 * (start + i) + 403),
            "domain": "math",
            "license": "MIT",
        }
        for i in range(n)
    ]


def _parquet_bytes(table: pa.Table, **kw) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf, **kw)
    return buf.getvalue()


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | 0x80 if n else b)
        if not n:
            return bytes(out)


def footer_lie(data: bytes, true_rows: int, claimed: int, which=None) -> bytes:
    """A Parquet file whose footer's i64 row counts (thrift compact: field
    delta 1, type i64, zigzag varint) of `true_rows` say `claimed`;
    `which`: indices of the occurrences to change (None: all; the file's
    num_rows is the first, the row group's the last)."""
    flen = struct.unpack("<I", data[-8:-4])[0]
    foot = data[-8 - flen : -8]
    old, new = b"\x16" + _varint(true_rows * 2), b"\x16" + _varint(claimed * 2)
    parts = foot.split(old)
    assert len(parts) > 1, "no row count found in the footer"
    keep = range(len(parts) - 1) if which is None else [i if i >= 0 else len(parts) - 1 + i for i in which]
    out = parts[0]
    for i, part in enumerate(parts[1:]):
        out += (new if i in keep else old) + part
    return data[: -8 - flen] + out + struct.pack("<I", len(out)) + b"PAR1"


def _datasets(folder: Path, table: pa.Table | None = None) -> Path:
    """A saved datasets folder as datasets 2+ writes one (an Arrow stream)."""
    folder.mkdir()
    table = table if table is not None else pa.Table.from_pylist(rows(300))
    with pa.OSFile(str(folder / ARROW), "wb") as f, pa.ipc.new_stream(f, table.schema) as w:
        for b in table.to_batches(max_chunksize=100):
            w.write_batch(b)
    (folder / "state.json").write_text(
        json.dumps(
            {
                "_data_files": [{"filename": ARROW}],
                "_fingerprint": "0",
                "_format_columns": None,
                "_format_kwargs": {},
                "_format_type": None,
                "_output_all_columns": False,
                "_split": None,
            }
        )
    )
    (folder / "dataset_info.json").write_text(
        json.dumps({"features": {c: {"dtype": "string", "_type": "Value"} for c in table.schema.names}})
    )
    return folder


# --- Parquet ---------------------------------------------------------------------------------------


def parquet_footer_lie(d: Path):
    data = _parquet_bytes(pa.Table.from_pylist(rows(5)))
    (d / "lie_million.parquet").write_bytes(footer_lie(data, 5, 1_000_000))
    return "lie_million.parquet", ("refused", "declares 1,000,000 rows")


def parquet_rows_not_held(d: Path):
    """Every count says 9,000 (within the budget of rows): the data holds 5."""
    data = _parquet_bytes(pa.Table.from_pylist(rows(5)))
    (d / "lie_9000.parquet").write_bytes(footer_lie(data, 5, 9_000))
    return "lie_9000.parquet", ("refused", "declares 9,000 rows but holds 5")


def parquet_row_group_lie(d: Path):
    """The file and row group say 40 rows, the column chunks 5 values."""
    data = _parquet_bytes(pa.Table.from_pylist(rows(5)))
    (d / "lie_group.parquet").write_bytes(footer_lie(data, 5, 40, which=[0, -1]))
    return "lie_group.parquet", ("refused", "declares 40 rows but column")


def parquet_truncated(d: Path):
    data = _parquet_bytes(pa.Table.from_pylist(rows(200)))
    (d / "lie_truncated.parquet").write_bytes(data[: len(data) // 2])
    return "lie_truncated.parquet", ("refused", "cannot read file")


def parquet_garbage_pages(d: Path):
    """A valid footer over data pages overwritten with garbage."""
    data = bytearray(_parquet_bytes(pa.Table.from_pylist(rows(200)), compression="none"))
    for i in range(4, min(len(data) // 2, 2000)):
        data[i] = (i * 131 + 7) % 256
    (d / "lie_garbage_pages.parquet").write_bytes(bytes(data))
    return "lie_garbage_pages.parquet", ("refused", "")


def parquet_huge_string(d: Path):
    """One 40 MB string, zstd-compressed to a few KB: it unpacks past the budget."""
    table = pa.table({"task_id": ["big"], "prompt": ["x" * 40_000_000], "answer": ["1"]})
    pq.write_table(table, d / "lie_huge_string.parquet", compression="zstd", use_dictionary=False)
    return "lie_huge_string.parquet", ("refused", "unpacks to over")


def parquet_dictionary_bomb(d: Path):
    """A 1 MB prompt stored once in a dictionary and used by 20,000 rows:
    50 KB on disk, 20 GB once decoded."""
    n = 20_000
    prompt = pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int32)), pa.array(["y" * 1_000_000]))
    table = pa.table({"task_id": [f"b{i}" for i in range(n)], "prompt": prompt, "answer": ["1"] * n})
    pq.write_table(table, d / "lie_dictionary.parquet", compression="zstd")
    return "lie_dictionary.parquet", ("refused", "decode to over")


def parquet_empty(d: Path):
    (d / "lie_empty.parquet").write_bytes(b"")
    return "lie_empty.parquet", ("refused", "cannot read file")


# --- datasets folders --------------------------------------------------------------------------------


def datasets_bad_offsets(d: Path):
    """A valid header, string offsets pointing past the data: once SIGSEGV."""
    folder = _datasets(d / "lie_ds_offsets")
    data = (folder / ARROW).read_bytes()
    prompts = pa.Table.from_pylist(rows(300)).column("prompt").chunk(0).slice(0, 100)
    offsets = np.frombuffer(pa.array(prompts.to_pylist()).buffers()[1], dtype=np.int32)
    at = data.find(offsets.tobytes())
    assert at > 0
    bad = offsets.copy()
    bad[50] = 1_000_000_000
    (folder / ARROW).write_bytes(data[:at] + bad.tobytes() + data[at + len(bad.tobytes()) :])
    return folder.name, ("refused", "is damaged")


def datasets_offsets_backwards(d: Path):
    folder = _datasets(d / "lie_ds_backwards")
    data = (folder / ARROW).read_bytes()
    prompts = pa.Table.from_pylist(rows(300)).column("prompt").chunk(0).slice(0, 100)
    offsets = np.frombuffer(pa.array(prompts.to_pylist()).buffers()[1], dtype=np.int32)
    at = data.find(offsets.tobytes())
    bad = offsets.copy()
    bad[60] = bad[20]
    (folder / ARROW).write_bytes(data[:at] + bad.tobytes() + data[at + len(bad.tobytes()) :])
    return folder.name, ("refused", "non-monotonic offset")


def datasets_length_lie(d: Path):
    """The first record batch's length says 1,000,000 rows, its arrays hold 100."""
    folder = _datasets(d / "lie_ds_length")
    data = (folder / ARROW).read_bytes()
    second = data.find(b"\xff\xff\xff\xff", 8)
    k = data.find(struct.pack("<q", 100), second)
    (folder / ARROW).write_bytes(data[:k] + struct.pack("<q", 1_000_000) + data[k + 8 :])
    return folder.name, ("refused", "cannot read file")


def datasets_truncated(d: Path):
    folder = _datasets(d / "lie_ds_truncated")
    data = (folder / ARROW).read_bytes()
    (folder / ARROW).write_bytes(data[: len(data) // 3])
    return folder.name, ("refused", "cannot read file")


def datasets_zero_length_arrow(d: Path):
    folder = _datasets(d / "lie_ds_empty_arrow")
    (folder / ARROW).write_bytes(b"")
    return folder.name, ("refused", "cannot read file")


def datasets_garbage_middle(d: Path):
    """4 KB of garbage in the middle of the Arrow file, over its offsets."""
    folder = _datasets(d / "lie_ds_garbage", pa.Table.from_pylist(rows(3000)))
    data = (folder / ARROW).read_bytes()
    prompts = pa.array([r["prompt"] for r in rows(3000)][1000:2000])
    at = data.find(prompts.buffers()[1].to_pybytes()[:64])
    assert at > 0
    garbage = bytes((i * 197 + 91) % 256 for i in range(4096))
    (folder / ARROW).write_bytes(data[:at] + garbage + data[at + 4096 :])
    return folder.name, ("refused", "is damaged")


def datasets_no_state(d: Path):
    folder = _datasets(d / "lie_ds_no_state")
    (folder / "state.json").unlink()
    return folder.name, ("refused", "has no state.json")


def datasets_state_escapes(d: Path):
    folder = _datasets(d / "lie_ds_escape")
    (folder / "state.json").write_text(json.dumps({"_data_files": [{"filename": "../../../../dev/zero"}]}))
    return folder.name, ("refused", "not a plain file name")


def datasets_state_not_json(d: Path):
    folder = _datasets(d / "lie_ds_state_garbage")
    (folder / "state.json").write_bytes(b"\xff\xfe{ not json")
    return folder.name, ("refused", "not valid JSON")


def datasets_link_to_device(d: Path):
    folder = _datasets(d / "lie_ds_devzero")
    (folder / ARROW).unlink()
    os.symlink("/dev/zero", folder / ARROW)
    return folder.name, ("refused", "outside the folder")


def datasets_state_is_fifo(d: Path):
    folder = _datasets(d / "lie_ds_fifo_state")
    (folder / "state.json").unlink()
    os.mkfifo(folder / "state.json")
    return folder.name, ("refused", "state.json is a FIFO")


def datasets_arrow_is_fifo(d: Path):
    folder = _datasets(d / "lie_ds_fifo_arrow")
    (folder / ARROW).unlink()
    os.mkfifo(folder / ARROW)
    return folder.name, ("refused", "is a FIFO")


def datasets_info_lies(d: Path):
    """dataset_info.json claims a trillion rows and petabytes: never trusted,
    the 300 rows of the Arrow data are read."""
    folder = _datasets(d / "lie_ds_info")
    (folder / "dataset_info.json").write_text(
        json.dumps(
            {
                "features": {"task_id": {"dtype": "string", "_type": "Value"}},
                "dataset_size": 10**18,
                "splits": {"train": {"name": "train", "num_bytes": 10**18, "num_examples": 10**12}},
            }
        )
    )
    return folder.name, ("rows", 300, 0, None)


# --- compressed and odd JSONL ------------------------------------------------------------------------


def _members(compress, block: bytes, count: int) -> bytes:
    """`count` concatenated streams of `block` (gzip, bz2 and xz readers
    read them as one): a bomb of count x len(block) bytes, made fast."""
    return compress(block) * count


def gzip_bomb(d: Path):
    """100 MB of the same valid row in ~100 KB of gzip."""
    line = json.dumps(rows(1)[0]).encode() + b"\n"
    (d / "lie_bomb.jsonl.gz").write_bytes(
        _members(lambda b: gzip.compress(b, 9, mtime=0), line * (1_000_000 // len(line)), 100)
    )
    return "lie_bomb.jsonl.gz", ("refused", "decompresses to over")


def gzip_newline_bomb(d: Path):
    """Blank lines only: cheap to read, but 50 million of them."""
    (d / "lie_newlines.jsonl.gz").write_bytes(_members(lambda b: gzip.compress(b, 9, mtime=0), b"\n" * 1_000_000, 50))
    return "lie_newlines.jsonl.gz", ("refused", "decompresses to over")


def bz2_bomb(d: Path):
    """One endless line, no line break at all."""
    (d / "lie_bomb.jsonl.bz2").write_bytes(_members(bz2.compress, b"{" * 10_000_000, 10))
    return "lie_bomb.jsonl.bz2", ("refused", "decompresses to over")


def xz_bomb(d: Path):
    (d / "lie_bomb.ndjson.xz").write_bytes(_members(lzma.compress, b"{}\n" * 1_000_000, 20))
    return "lie_bomb.ndjson.xz", ("refused", "decompresses to over")


def empty_jsonl(d: Path):
    (d / "lie_empty.jsonl").write_bytes(b"")
    return "lie_empty.jsonl", ("rows", 0, 0, None)


def empty_gzip(d: Path):
    (d / "lie_empty.jsonl.gz").write_bytes(b"")
    return "lie_empty.jsonl.gz", ("rows", 0, 0, None)


def utf16_jsonl(d: Path):
    """A UTF-16 export (with its byte-order mark): one line for the file."""
    text = "".join(json.dumps(r) + "\n" for r in rows(3))
    (d / "lie_utf16.jsonl").write_bytes(text.encode("utf-16"))
    return "lie_utf16.jsonl", ("refused", "UTF-16")


def utf16_no_bom_jsonl(d: Path):
    text = "".join(json.dumps(r) + "\n" for r in rows(3))
    (d / "lie_utf16le.jsonl.gz").write_bytes(gzip.compress(text.encode("utf-16-le"), mtime=0))
    return "lie_utf16le.jsonl.gz", ("refused", "UTF-16")


def latin1_jsonl(d: Path):
    good = json.dumps(rows(1)[0]).encode()
    bad = json.dumps(dict(rows(1, 1)[0], prompt="Caf\u00e9 1 + 2."), ensure_ascii=False).encode("latin-1")
    (d / "lie_latin1.jsonl").write_bytes(good + b"\n" + bad + b"\n")
    return "lie_latin1.jsonl", ("rows", 2, 1, "invalid UTF-8")


CASES = [
    parquet_footer_lie,
    parquet_rows_not_held,
    parquet_row_group_lie,
    parquet_truncated,
    parquet_garbage_pages,
    parquet_huge_string,
    parquet_dictionary_bomb,
    parquet_empty,
    datasets_bad_offsets,
    datasets_offsets_backwards,
    datasets_length_lie,
    datasets_truncated,
    datasets_zero_length_arrow,
    datasets_garbage_middle,
    datasets_no_state,
    datasets_state_escapes,
    datasets_state_not_json,
    datasets_link_to_device,
    datasets_state_is_fifo,
    datasets_arrow_is_fifo,
    datasets_info_lies,
    gzip_bomb,
    gzip_newline_bomb,
    bz2_bomb,
    xz_bomb,
    empty_jsonl,
    empty_gzip,
    utf16_jsonl,
    utf16_no_bom_jsonl,
    latin1_jsonl,
]


def write_all(d: Path) -> dict[str, tuple]:
    """Every case into folder `d`: name -> expectation."""
    d.mkdir(parents=True, exist_ok=True)
    return dict(case(d) for case in CASES)
