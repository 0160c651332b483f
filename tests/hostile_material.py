"""The hostile material tests/hostile.py builds its corpus from: strings
that must stay plain text to Parquet and DuckDB, the values a field may be
given, bytes a mutation may plant, and the template rows and mutations
themselves. Deterministic given the caller's random.Random."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
import random


# Strings that must stay plain text all the way to Parquet and DuckDB.
WEIRD_TEXT = [
    "'; DROP TABLE tasks; --",
    "bob's runs",
    "<script>alert(1)</script>",
    "../../etc/passwd",
    "\u202eevil\u202c",
    "z\u0335\u0336a\u0337l\u0338g\u0321o",
    "\u0000nul",
    "tab\tand\u000bvt",
    "\U0001f600 emoji",
    "\u200b\u200d",
    "\ufeffbom inside",
    "\u2028line sep\u2029",
    "%s%n%x",
    "{{7*7}}",
    "C:\\\\windows\\\\path",
    "\\\\ud800 as text",
    "\u0085next line",
    "⓺x circled",
    "7" * 5000,
    "hundred " * 600,
]  # each once stopped near dedup's number reader


# Values a field may be given (RAW markers become raw JSON text, see raw_line).
VALUE_POOL = [
    None,
    "",
    " ",
    True,
    False,
    0,
    -1,
    -0.5,
    1e308,
    1e-320,
    10**50,
    [1, 2],
    {"a": 1},
    [],
    {},
    "poetry",
    "2026-13-45",
    "ten",
    "inf",
    "NaN",
    "-3",
    "x" * 120_000,
    "9" * 5000,
    "RAW:NaN",
    "RAW:Infinity",
    "RAW:-Infinity",
    "RAW:" + "9" * 5000,
    "RAW:" + "1" * 150,
    "RAW:" + "[" * 70 + "]" * 70,
    "RAW:" + "[" * 2500 + "]" * 2500,
    'RAW:"\\ud800"',
    'RAW:"a\\udfff"',
    "RAW:1e999",
    "RAW:-1e999",
    'RAW:{"\\ud800": 1}',
] + WEIRD_TEXT


FIELDS = [
    "task_id",
    "prompt",
    "answer",
    "domain",
    "expert_minutes",
    "expert_cost_usd",
    "created_at",
    "meta",
    "rubric",
    "tests",
    "entry_point",
    "license",
    "source",
    "batch_id",
    "vendor_extra",
]


INTERESTING_BYTES = [
    b"\x00",
    b"\xff",
    b"\xc3",
    b"\xed\xa0\x80",
    b"\\ud800",
    b"\\u0000",
    b"{",
    b"[",
    b"]",
    b'"',
    b",",
    b":",
    b"9" * 120,
    b"\xef\xbb\xbf",
    b"NaN",
    b"\t",
    b"\\",
    b"\x7f",
    b"\xe2\x80\xa8",
]


def template(rng: random.Random, n: int) -> dict:
    """A hostile row that would be valid: its own prompt text, never like a valid row's."""
    words = rng.sample(
        [
            "violet",
            "granite",
            "harbour",
            "lantern",
            "meadow",
            "quartz",
            "saffron",
            "thistle",
            "walnut",
            "zephyr",
            "cobalt",
            "ember",
            "fjord",
            "juniper",
        ],
        4,
    )
    return {
        "task_id": f"H-{n}",
        "prompt": f"Hostile row {n}: which of {', '.join(words)} is longest?",
        "answer": words[0],
        "domain": rng.choice(["exact", "math", "exact"]),
        "expert_minutes": rng.choice([1, 2.5, "3"]),
        "created_at": "2026-01-01",
        "license": "MIT",
        "meta": rng.choice([None, {"k": "v"}, json.dumps({"k": [1, 2]}), "free text"]),
    }


def raw_line(rec: dict) -> bytes:
    """The row as one JSON line; "RAW:..." string values become raw JSON text."""
    raws = {}

    def mark(v):
        if isinstance(v, str) and v.startswith("RAW:"):
            key = f"__raw_{len(raws)}__"
            raws[key] = v[4:].encode()
            return key
        if isinstance(v, dict):
            return {mark(k) if isinstance(k, str) and k.startswith("RAW:") else k: mark(x) for k, x in v.items()}
        return v

    text = json.dumps({k: mark(v) for k, v in rec.items()}, allow_nan=True).encode()
    for key, raw in raws.items():
        text = text.replace(f'"{key}"'.encode(), raw)
    return text


def value_mutation(rng: random.Random, rec: dict) -> bytes:
    rec = dict(rec)
    for _ in range(rng.randint(1, 3)):
        rec[rng.choice(FIELDS)] = rng.choice(VALUE_POOL)
    return raw_line(rec)


def byte_mutation(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(4)
        pos = rng.randrange(len(b) + 1)
        if op == 0 and b:
            b[min(pos, len(b) - 1)] = rng.choice([x for x in range(256) if x not in (10, 13)])
        elif op == 1:
            b[pos:pos] = rng.choice(INTERESTING_BYTES)
        elif op == 2 and b:
            del b[pos : pos + rng.randint(1, 12)]
        else:
            b[pos:pos] = b[pos : pos + rng.randint(1, 40)]
    return bytes(b)


def is_row(data: bytes) -> bool:
    return bool(data.strip())


def write_jsonl(path: Path, lines: list[bytes], style: str) -> None:
    end = {"lf": b"\n", "crlf": b"\r\n", "cr": b"\r"}[style.replace("bom-", "").replace("gz-", "")]
    data = b"".join(ln + end for ln in lines)
    if style.startswith("bom-"):
        data = b"\xef\xbb\xbf" + data
    if style.startswith("gz-"):
        data = gzip.compress(data, mtime=0)
    path.write_bytes(data)
