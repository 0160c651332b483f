"""One case per class of bad input in README's "What happens to bad input"
table: each writes a small delivery and says what must happen to it.

`tests/transforms/test_bad_input.py` runs every case through the reader and the
validator (the functions the pipeline runs) and checks that the README row
names exactly what they produce; `tests/run/test_hostile.py` plants every class
in a large generated delivery and runs it end to end.

A case returns (input paths, expectation), where the expectation is one of
  ("quarantine", stage, reason): the one bad row is quarantined with this reason;
  ("read", n_rows): all n rows are read as valid tasks;
  ("skip", warning): the folder's other files are read, this warning is given;
  ("refuse", message): the run does not start (one line).
"""

from __future__ import annotations

import bz2
import gzip
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

GOOD = {"task_id": "g1", "prompt": "Calculate 12 + 30.", "answer": "42"}


def good(i: int, **fields) -> dict:
    return dict({"task_id": f"g{i}", "prompt": f"Calculate {i + 2} + {i + 30}.", "answer": str(2 * i + 32)}, **fields)


def line(rec) -> bytes:
    return json.dumps(rec).encode()


def jsonl(path: Path, lines: list[bytes], end: bytes = b"\n") -> list[str]:
    path.write_bytes(b"".join(ln + end for ln in lines))
    return [str(path)]


def invalid_utf8_table(n_bad_at: int = 1) -> pa.Table:
    """Three rows; row `n_bad_at` has invalid UTF-8 in its prompt (Arrow
    does not validate strings built from raw buffers, nor does the writer)."""
    prompts = [f"Calculate {i + 2} + {i + 30}.".encode() for i in range(3)]
    prompts[n_bad_at] = b"Cal\xffculate 5 + 6."
    raw = pa.array(prompts, pa.binary())
    return pa.table(
        {
            "task_id": [f"p{i}" for i in range(3)],
            "prompt": pa.Array.from_buffers(pa.string(), 3, raw.buffers()),
            "answer": [str(2 * i + 32) for i in range(3)],
        }
    )


# --- one row quarantined ------------------------------------------------------------------------


def malformed_json(d: Path):
    return jsonl(d / "d.jsonl", [line(GOOD)[:-1] + b' "answer": "x"}']), ("quarantine", "read", None)


def truncated_last_line(d: Path):
    return jsonl(d / "d.jsonl", [b'{"task_id": "t", "prompt": "Calcul'], end=b""), ("quarantine", "read", None)


def json_array_row(d: Path):
    return jsonl(d / "d.jsonl", [b"[1, 2, 3]"]), ("quarantine", "read", None)


def invalid_utf8_jsonl(d: Path):
    return jsonl(d / "d.jsonl", [b'{"task_id": "t", "prompt": "caf\xe9"}']), ("quarantine", "read", None)


def invalid_utf8_parquet(d: Path):
    pq.write_table(invalid_utf8_table(1), d / "d.parquet")
    return [str(d / "d.parquet")], ("quarantine", "read", None)


def row_over_max_bytes(d: Path):
    return jsonl(d / "d.jsonl", [line(good(1, prompt="x" * 1_200_000))]), ("quarantine", "read", None)


def nesting_too_deep(d: Path):
    return jsonl(d / "d.jsonl", [b'{"meta": ' + b"[" * 5000 + b"]" * 5000 + b"}"]), ("quarantine", "read", None)


def nesting_over_limit(d: Path):
    return jsonl(d / "d.jsonl", [line(good(1))[:-1] + b', "x": ' + b"[" * 70 + b"]" * 70 + b"}"]), (
        "quarantine",
        "read",
        None,
    )


def number_too_long(d: Path):
    return jsonl(d / "d.jsonl", [line(good(1))[:-1] + b', "expert_minutes": ' + b"9" * 400 + b"}"]), (
        "quarantine",
        "read",
        None,
    )


def lone_surrogate(d: Path):
    return jsonl(d / "d.jsonl", [b'{"task_id": "t", "prompt": "Calculate 1 + 1. \\ud800", "answer": "2"}']), (
        "quarantine",
        "read",
        None,
    )


def unreadable_file(d: Path):
    (d / "d.parquet").write_bytes(b"PAR1 this is not parquet")
    return [str(d / "d.parquet")], ("quarantine", "read", None)


def broken_gzip(d: Path):
    data = gzip.compress(b"".join(line(good(i)) + b"\n" for i in range(3)))
    (d / "d.jsonl.gz").write_bytes(data[:-12])
    return [str(d / "d.jsonl.gz")], ("quarantine", "read", None)


def lying_file(d: Path):
    import hostile_files

    name, _ = hostile_files.parquet_footer_lie(d)
    return [str(d / name)], ("quarantine", "read", None)


def damaged_arrow(d: Path):
    import hostile_files

    name, _ = hostile_files.datasets_bad_offsets(d)
    return [str(d / name)], ("quarantine", "read", None)


def missing_prompt(d: Path):
    return jsonl(d / "d.jsonl", [line(good(1, prompt="  "))]), ("quarantine", "validate", None)


def wrong_type(d: Path):
    return jsonl(d / "d.jsonl", [line(good(1, prompt=42))]), ("quarantine", "validate", None)


def unknown_domain(d: Path):
    return jsonl(d / "d.jsonl", [line(good(1, domain="poetry"))]), ("quarantine", "validate", None)


def no_reference(d: Path):
    return jsonl(d / "d.jsonl", [line(good(1, answer=None))]), ("quarantine", "validate", None)


def negative_cost(d: Path):
    return jsonl(d / "d.jsonl", [line(good(1, expert_minutes=-3))]), ("quarantine", "validate", None)


def absurd_cost(d: Path):
    return jsonl(d / "d.jsonl", [line(good(1, expert_cost_usd=1e308))]), ("quarantine", "validate", None)


def non_finite_cost(d: Path):
    return jsonl(d / "d.jsonl", [line(good(1))[:-1] + b', "expert_cost_usd": Infinity}']), (
        "quarantine",
        "validate",
        None,
    )


def meta_text_hostile(d: Path):
    meta = "{" + '"a": ' * 1 + "[" * 3000 + "]" * 3000 + "}"
    return jsonl(d / "d.jsonl", [line(good(1, meta=meta))]), ("quarantine", "validate", None)


def bad_date(d: Path):
    return jsonl(d / "d.jsonl", [line(good(1, created_at="last tuesday"))]), ("quarantine", "validate", None)


def field_too_long(d: Path):
    return jsonl(d / "d.jsonl", [line(good(1, prompt="Calculate 1 + 1. " + "x" * 100_000))]), (
        "quarantine",
        "validate",
        None,
    )


def repeated_task_id(d: Path):
    return jsonl(d / "d.jsonl", [line(good(1)), line(good(2, task_id="g1"))]), ("quarantine", "validate", None)


# --- read normally ---------------------------------------------------------------------------


def bom_and_line_ends(d: Path):
    rows = [line(good(i)) for i in range(3)]
    (d / "bom.jsonl").write_bytes(b"\xef\xbb\xbf" + b"\n".join(rows) + b"\n")
    (d / "crlf.jsonl").write_bytes(b"\r\n".join(line(good(i + 3)) for i in range(3)) + b"\r\n")
    (d / "cr.jsonl").write_bytes(b"\r".join(line(good(i + 6)) for i in range(3)))
    (d / "blank.jsonl").write_bytes(b"\n  \n" + line(good(9)) + b"\n\t\n\n")
    return [str(d)], ("read", 10)


def compressed_and_upper_case(d: Path):
    (d / "a.jsonl.gz").write_bytes(gzip.compress(line(good(1)) + b"\n"))
    (d / "b.ndjson.bz2").write_bytes(bz2.compress(line(good(2)) + b"\n"))
    (d / "C.JSONL").write_bytes(line(good(3)) + b"\n")
    pq.write_table(pa.Table.from_pylist([good(4)]), d / "D.Parquet")
    return [str(d)], ("read", 4)


# --- skipped, with a warning -------------------------------------------------------------------


def other_files(d: Path):
    jsonl(d / "d.jsonl", [line(good(1))])
    (d / "notes.txt").write_text("not a delivery")
    (d / "more.jsonl.zst").write_bytes(b"\x28\xb5\x2f\xfd")
    return [str(d)], (
        "skip",
        ["notes.txt: not a delivery file", "more.jsonl.zst: compressed as .zst, which is not read"],
    )


def special_files(d: Path):
    jsonl(d / "d.jsonl", [line(good(1))])
    os.mkfifo(d / "pipe.jsonl")
    os.symlink(d / "gone.jsonl", d / "dangling.jsonl")
    jsonl(d.parent / "host.jsonl", [line(good(2))])  # a file of the host's, outside the delivery
    os.symlink(d.parent / "host.jsonl", d / "linked.jsonl")
    return [str(d)], (
        "skip",
        [
            "pipe.jsonl: a FIFO, not a delivery file",
            "dangling.jsonl: a broken link",
            "linked.jsonl: a link to",
            "outside the input folder",
        ],
    )


def link_loop(d: Path):
    (d / "sub").mkdir()
    jsonl(d / "sub" / "d.jsonl", [line(good(1))])
    os.symlink(d, d / "sub" / "loop")  # sub/loop -> d: a cycle
    os.symlink(d / "sub" / "d.jsonl", d / "again.jsonl")
    return [str(d)], ("skip", ["loop: a link to the folder", "d.jsonl: the same file as"])


# --- the run does not start ----------------------------------------------------------------------


def out_inside_input(d: Path):
    jsonl(d / "d.jsonl", [line(good(1))])
    return [str(d)], ("refuse", "is inside the --input folder")


def device_input(d: Path):
    return ["/dev/zero"], ("refuse", "is a device")


def missing_input(d: Path):
    return [str(d / "nope.jsonl")], ("refuse", "input not found")


# README table row (first cell) -> case. Keep in step with the README.
CASES = {
    "malformed JSON line": malformed_json,
    "file ends mid-record": truncated_last_line,
    "a JSON array/string/number row": json_array_row,
    "invalid UTF-8 in a JSONL line": invalid_utf8_jsonl,
    "invalid UTF-8 in a Parquet/datasets value": invalid_utf8_parquet,
    "row over `limits.max_row_bytes`": row_over_max_bytes,
    "nesting too deep to parse (~1,000 levels)": nesting_too_deep,
    "nesting over 64 levels": nesting_over_limit,
    "a number literal over 100 digits (up to any length)": number_too_long,
    'a lone surrogate escape (`"\\ud800"`) in any value or key': lone_surrogate,
    "unreadable file (corrupt Parquet)": unreadable_file,
    "a compressed file that breaks off": broken_gzip,
    "a file claiming more than its size holds (a Parquet footer's row counts, a compression bomb)": lying_file,
    "a damaged Arrow file in a `datasets` folder": damaged_arrow,
    "missing/empty prompt or task_id": missing_prompt,
    "wrong type": wrong_type,
    "unknown domain": unknown_domain,
    "no reference for the domain": no_reference,
    "negative / non-numeric cost": negative_cost,
    "absurd cost or minutes": absurd_cost,
    "non-finite cost or minutes (`NaN`, `Infinity`)": non_finite_cost,
    "`meta` as JSON text nested too deep, or with a huge number": meta_text_hostile,
    "`created_at` not ISO 8601": bad_date,
    "field over `limits.max_field_chars`": field_too_long,
    "task_id repeated within a source": repeated_task_id,
    "UTF-8 BOM, CRLF or CR-only line ends, blank lines": bom_and_line_ends,
    "`.gz`/`.bz2`/`.xz` JSONL, upper-case extensions": compressed_and_upper_case,
    "other files in an input folder (`.txt`, `.zst`)": other_files,
    "FIFOs, devices, broken links, links out of the folder (to `~/.aws`, `/etc`) in an input folder": special_files,
    "a link to a folder or file already read (a link loop)": link_loop,
    "`--out` inside an `--input` folder": out_inside_input,
    "a device, FIFO or `/proc` file given as an input": device_input,
    "missing input, bad config, model that does not load": missing_input,
}
