"""A deterministic generator of hostile deliveries for test_hostile.py.

`build(root)` writes two input folders:
- `root/hostile/in`: valid rows mixed with over 1,000 hostile ones: every
  class of README's "What happens to bad input" table (planted by hand,
  each with the reason it must get), plus random byte mutations and random
  value mutations of hostile template rows, spread over JSONL files (LF,
  CRLF, CR-only, BOM, gzip, upper-case names), Parquet files and saved
  `datasets` folders, damaged and lying files refused whole
  (tests/hostile_files.py), and files that must be skipped (a FIFO, a link loop,
  a duplicate link, a broken link, a .txt, a .zst);
- `root/baseline/in`: the same files with only the valid rows.
It also writes `root/replay.jsonl`, recorded attempts that make each valid
row learnable, all_pass or all_fail (`--replay`, so nothing is sampled).

The generator counts the rows it wrote itself (`Corpus.rows`), so the
test's row count owes nothing to tasksieve's reader.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from hostile_material import WEIRD_TEXT, byte_mutation, raw_line, template, value_mutation, is_row, write_jsonl

SEED = 11
OUTCOMES = ("learnable", "all_pass", "all_fail")


@dataclass
class Corpus:
    root: Path
    rows: int = 0  # rows in the hostile inputs, counted by the generator
    baseline_rows: int = 0
    hostile_rows: int = 0  # of `rows`: rows that are not valid
    valid: dict = field(default_factory=dict)  # task_id -> expected outcome
    planted: dict = field(default_factory=dict)  # (file name, line) -> reason substring
    classes: set = field(default_factory=set)  # names of the planted classes
    skipped: list = field(default_factory=list)  # file names that must be skipped with a warning

    @property
    def hostile_in(self) -> Path:
        return self.root / "hostile" / "in"

    @property
    def baseline_in(self) -> Path:
        return self.root / "baseline" / "in"


def valid_row(i: int) -> dict:
    a, b = 3 + 2 * i, 200 + 7 * i  # distinct pairs, a < b, the sum is neither number
    tid = "ok-" + hashlib.sha1(f"valid {i}".encode()).hexdigest()[:12]
    return {
        "task_id": tid,
        "prompt": f"Calculate {a} + {b}.",
        "answer": str(a + b),
        "domain": "math",
        "expert_minutes": 2.5,
        "created_at": "2020-01-01",
        "license": "MIT",
    }


def replay_rows(rows: list[dict], outcomes: list[str]) -> list[dict]:
    """Four recorded attempts per valid row, deciding its outcome."""
    out = []
    for row, outcome in zip(rows, outcomes):
        right, wrong = int(row["answer"]), int(row["answer"]) + 1
        answers = {"learnable": [right, wrong, right, wrong], "all_pass": [right] * 4, "all_fail": [wrong] * 4}[outcome]
        for j, v in enumerate(answers):
            out.append(
                {
                    "prompt": row["prompt"],
                    "domain": "math",
                    "answer": row["answer"],
                    "attempt_idx": j,
                    "completion": f"The answer is \\boxed{{{v}}}",
                }
            )
    return out


# --- hostile material -----------------------------------------------------------------------------


# Hand-planted JSONL rows: (class, line bytes, reason substring). None: the row is valid.
def planted_jsonl(rng: random.Random, n: int) -> list[tuple[str, bytes, str | None]]:
    t = template(rng, n)
    good = raw_line(t)
    return [
        ("malformed JSON line", good[:-1] + b' "x" 1}', "malformed JSON"),
        ("a JSON array/string/number row", b"[1, 2, 3]", "row is a JSON list"),
        ("a JSON array/string/number row", b'"just a string"', "row is a JSON str"),
        ("a JSON array/string/number row", b"42", "row is a JSON int"),
        ("invalid UTF-8 in a JSONL line", good[:30] + b"\xff\xfe" + good[30:], "invalid UTF-8"),
        ("row over `limits.max_row_bytes`", raw_line(dict(t, prompt="y" * 1_000_100)), "over the 1000000-byte limit"),
        (
            "nesting too deep to parse (~1,000 levels)",
            b'{"meta": ' + b"[" * 3000 + b"]" * 3000 + b"}",
            "nests too deeply to parse",
        ),
        (
            "nesting over 64 levels",
            raw_line(dict(t, meta="RAW:" + '{"a": ' * 80 + "1" + "}" * 80)),
            "nests deeper than the 64-level limit",
        ),
        (
            "a number literal over 100 digits (up to any length)",
            raw_line(dict(t, expert_minutes="RAW:" + "9" * 400)),
            "holds a number of 400 digits",
        ),
        (
            "a number literal over 100 digits (up to any length)",
            raw_line(dict(t, expert_cost_usd="RAW:" + "9" * 5000)),
            "holds a number of 5000 digits",
        ),
        (
            "a number literal over 100 digits (up to any length)",
            raw_line(dict(t, meta=json.dumps({"n": 1}), vendor_extra="RAW:" + "7" * 4301)),
            "holds a number of 4301 digits",
        ),
        (
            'a lone surrogate escape (`"\\ud800"`) in any value or key',
            raw_line(dict(t, prompt='RAW:"Hostile \\ud800 prompt"')),
            "field 'prompt' holds a lone surrogate",
        ),
        (
            'a lone surrogate escape (`"\\ud800"`) in any value or key',
            raw_line(dict(t, task_id='RAW:"\\udc00"')),
            "field 'task_id' holds a lone surrogate",
        ),
        (
            'a lone surrogate escape (`"\\ud800"`) in any value or key',
            raw_line(dict(t, vendor_column='RAW:"\\ud800"')),
            "field 'vendor_column' holds a lone surrogate",
        ),
        (
            'a lone surrogate escape (`"\\ud800"`) in any value or key',
            raw_line(dict(t, meta='RAW:{"k": "\\ud800"}')),
            "field 'meta' holds a lone surrogate",
        ),
        (
            'a lone surrogate escape (`"\\ud800"`) in any value or key',
            raw_line(dict(t, meta='RAW:{"\\ud800": 1}')),
            "a field name holds a lone surrogate",
        ),
        ("missing/empty prompt or task_id", raw_line(dict(t, prompt="   ")), "field 'prompt' is missing or empty"),
        ("missing/empty prompt or task_id", raw_line(dict(t, task_id=None)), "field 'task_id' is missing or empty"),
        ("wrong type", raw_line(dict(t, prompt=["a", "list"])), "field 'prompt' is a list, expected text"),
        ("unknown domain", raw_line(dict(t, domain="poetry")), "field 'domain' is 'poetry'"),
        ("no reference for the domain", raw_line(dict(t, answer="")), "task has no 'answer'"),
        ("negative / non-numeric cost", raw_line(dict(t, expert_minutes=-3)), "is negative"),
        (
            "negative / non-numeric cost",
            raw_line(dict(t, expert_cost_usd="ten dollars")),
            "expected a non-negative number",
        ),
        (
            "absurd cost or minutes",
            raw_line(dict(t, expert_cost_usd=1e308)),
            "over the limits.max_expert_cost_usd limit",
        ),
        (
            "absurd cost or minutes",
            raw_line(dict(t, expert_minutes=10**40)),
            "over the limits.max_expert_minutes limit",
        ),
        ("non-finite cost or minutes (`NaN`, `Infinity`)", raw_line(dict(t, expert_cost_usd="RAW:NaN")), "is nan"),
        ("non-finite cost or minutes (`NaN`, `Infinity`)", raw_line(dict(t, expert_minutes="RAW:1e999")), "is inf"),
        ("non-finite cost or minutes (`NaN`, `Infinity`)", raw_line(dict(t, expert_cost_usd="-inf")), "is -inf"),
        (
            "`meta` as JSON text nested too deep, or with a huge number",
            raw_line(dict(t, meta="[" * 3000 + "]" * 3000)),
            "field 'meta' nests too deeply to parse",
        ),
        (
            "`meta` as JSON text nested too deep, or with a huge number",
            raw_line(dict(t, meta='{"n": ' + "9" * 5000 + "}")),
            "field 'meta' holds a number of 5000 digits",
        ),
        (
            "`meta` as JSON text nested too deep, or with a huge number",
            raw_line(dict(t, meta='{"n": NaN}')),
            "non-finite number",
        ),
        (
            "`meta` as JSON text nested too deep, or with a huge number",
            raw_line(dict(t, meta='"\\ud800"')),
            "field 'meta' holds a lone surrogate",
        ),
        ("`created_at` not ISO 8601", raw_line(dict(t, created_at="2026-13-45")), "expected an ISO 8601 date"),
        (
            "field over `limits.max_field_chars`",
            raw_line(dict(t, answer="z" * 100_001)),
            "over the 100000-character limit",
        ),
        (
            "task_id repeated within a source",
            raw_line(dict(t, prompt=t["prompt"] + " (again)")),
            "repeats within source",
        ),
        (
            "weird but valid text",
            raw_line(dict(t, task_id=f"H-{n}-w", prompt=t["prompt"] + " " + rng.choice(WEIRD_TEXT))),
            None,
        ),
    ], good


def jsonl_file_lines(
    rng: random.Random, corpus: Corpus, start: int, n_random: int, valid: list[dict], name: str
) -> tuple[list[tuple[bytes, str | None, dict | None]], int]:
    """Lines of one hostile JSONL file: (bytes, reason substring or None, valid row or None)."""
    out: list[tuple[bytes, str | None, dict | None]] = []
    n = start
    plants, first = planted_jsonl(rng, n)
    out.append((first, None, None))  # the first of the repeated task_id: a hostile row that is valid
    for cls, data, reason in plants:
        corpus.classes.add(cls)
        out.append((data, reason, None))
    n += 1
    for _ in range(n_random):
        t = template(rng, n)
        n += 1
        if rng.random() < 0.5:
            data = value_mutation(rng, t)
        else:
            data = byte_mutation(rng, raw_line(t))
        out.append((data, None, None))
    # Blank lines are layout, not rows.
    out.append((b"   ", None, None))
    out.append((b"", None, None))
    for v in valid:
        out.insert(rng.randrange(1, len(out) + 1), (raw_line(v), None, v))
    return out, n


def build(root: Path, n_valid: int = 60, n_random_per_file: int = 200) -> Corpus:
    rng = random.Random(SEED)
    corpus = Corpus(root=root)
    for d in (corpus.hostile_in, corpus.baseline_in):
        d.mkdir(parents=True)
    valid = [valid_row(i) for i in range(n_valid)]
    outcomes = [OUTCOMES[i % 3] for i in range(n_valid)]
    corpus.valid = {v["task_id"]: o for v, o in zip(valid, outcomes)}
    chunks = [valid[i::8] for i in range(8)]  # valid rows spread over 8 sources
    (root / "replay.jsonl").write_text("".join(json.dumps(r) + "\n" for r in replay_rows(valid, outcomes)))

    # JSONL files, each in its own line-end style.
    n = 0
    for i, (name, style) in enumerate(
        [
            ("mixed.jsonl", "lf"),
            ("WINDOWS.JSONL", "crlf"),
            ("old_mac.jsonl", "cr"),
            ("bom.ndjson", "bom-lf"),
            ("packed.jsonl.gz", "gz-lf"),
        ]
    ):
        lines, n = jsonl_file_lines(rng, corpus, n, n_random_per_file, chunks[i], name)
        write_jsonl(corpus.hostile_in / name, [ln for ln, _, _ in lines], style)
        write_jsonl(corpus.baseline_in / name, [ln for ln, _, v in lines if v is not None], style)
        line_no = 0
        for data, reason, v in lines:
            line_no += 1
            if not is_row(data):
                continue
            corpus.rows += 1
            corpus.hostile_rows += v is None
            if reason:
                corpus.planted[(name, line_no)] = reason
        corpus.baseline_rows += len(chunks[i])

    # A truncated last line (no final line end) after valid rows.
    lines = [raw_line(v) for v in chunks[5]] + [b'{"task_id": "H-trunc", "prompt": "Hostile and cut']
    (corpus.hostile_in / "trunc.jsonl").write_bytes(b"\n".join(lines))
    (corpus.baseline_in / "trunc.jsonl").write_bytes(b"\n".join(lines[:-1]) + b"\n")
    corpus.planted[("trunc.jsonl", len(lines))] = "truncated last line"
    corpus.classes.add("file ends mid-record")
    corpus.rows += len(lines)
    corpus.hostile_rows += 1
    corpus.baseline_rows += len(chunks[5])

    # A compressed file that breaks off: one row for the file.
    data = gzip.compress(b"".join(raw_line(template(rng, n + k)) + b"\n" for k in range(3)), mtime=0)
    (corpus.hostile_in / "broken.jsonl.gz").write_bytes(data[:-20])
    corpus.planted[("broken.jsonl.gz", 0)] = "cannot read file"
    corpus.classes.add("a compressed file that breaks off")
    corpus.rows += 1
    corpus.hostile_rows += 1
    n += 3

    n = _write_tables(rng, corpus, chunks[6], chunks[7], n)
    _write_specials(corpus)
    _write_lying_files(corpus)
    return corpus


def _write_lying_files(corpus: Corpus) -> None:
    """Damaged and lying files (tests/hostile_files.py) refused whole: one
    quarantine row each, with its reason, whatever they claim to hold."""
    import hostile_files

    corpus.classes |= {
        "a file claiming more than its size holds (a Parquet footer's row counts, a compression bomb)",
        "a damaged Arrow file in a `datasets` folder",
    }
    for name, expected in hostile_files.write_all(corpus.hostile_in / "lying").items():
        if expected[0] == "refused":
            corpus.planted[(name, 0)] = expected[1]
            corpus.rows += 1
            corpus.hostile_rows += 1
        else:  # read as the rows they hold: not part of this corpus
            target = corpus.hostile_in / "lying" / name
            shutil.rmtree(target) if target.is_dir() else target.unlink()


def _strings(values: list) -> pa.Array:
    """A string column that may hold invalid UTF-8 (bytes values), as a
    careless exporter writes it: Arrow does not check raw buffers."""
    raw = pa.array([v.encode("utf-8", "surrogatepass") if isinstance(v, str) else v for v in values], pa.binary())
    return pa.Array.from_buffers(pa.string(), len(values), raw.buffers(), null_count=raw.null_count)


def _write_tables(rng: random.Random, corpus: Corpus, valid_pq: list[dict], valid_ds: list[dict], n: int) -> int:
    import datasets

    # Parquet: valid rows, rows with invalid UTF-8 in a value, hostile numbers.
    rows = [dict(v) for v in valid_pq]
    planted = []
    for j in range(60):
        t = template(rng, n)
        n += 1
        kind = j % 6
        t["meta"] = json.dumps(t["meta"]) if not isinstance(t["meta"], str) or t["meta"] is None else t["meta"]
        if kind == 0:
            t["prompt"] = t["prompt"].encode() + b" \xff\xfe broken"
            reason = "invalid UTF-8 in column 'prompt'"
        elif kind == 1:
            t["task_id"] = b"H-\xc3"
            reason = "invalid UTF-8 in column 'task_id'"
        elif kind == 2:
            t["expert_cost_usd"] = float("nan")
            reason = "is nan"
        elif kind == 3:
            t["expert_cost_usd"] = float("inf")
            reason = "is inf"
        elif kind == 4:
            t["expert_minutes"] = 1e300
            reason = "over the limits.max_expert_minutes limit"
        else:
            t["meta"] = '{"deep": ' + "[" * 3000 + "]" * 3000 + "}"
            reason = "field 'meta' nests too deeply to parse"
        planted.append((t, reason))
    order = list(range(len(rows) + len(planted)))
    rng.shuffle(order)
    everything = rows + [t for t, _ in planted]
    table_rows = [everything[i] for i in order]

    def table(rs):
        cols = {}
        for name in ("task_id", "prompt", "answer", "domain", "created_at", "license", "meta"):
            cols[name] = _strings(
                [
                    r.get(name)
                    if not isinstance(r.get(name), (int, float)) or isinstance(r.get(name), bool)
                    else str(r.get(name))
                    for r in rs
                ]
            )
        for name in ("expert_minutes", "expert_cost_usd"):
            cols[name] = pa.array([float(r[name]) if r.get(name) is not None else None for r in rs], pa.float64())
        return pa.table(cols)

    # Small row groups: one bad value must not cost its neighbours.
    pq.write_table(table(table_rows), corpus.hostile_in / "tables.parquet", row_group_size=16)
    pq.write_table(table(rows), corpus.baseline_in / "tables.parquet", row_group_size=16)
    for pos, i in enumerate(order):
        if i >= len(rows):
            corpus.planted[("tables.parquet", pos + 1)] = planted[i - len(rows)][1]
    corpus.classes.add("invalid UTF-8 in a Parquet/datasets value")
    corpus.rows += len(table_rows)
    corpus.hostile_rows += len(planted)
    corpus.baseline_rows += len(rows)

    # Parquet of the wrong types throughout (every row quarantined), and a corrupt one.
    wrong = pa.table(
        {
            "task_id": pa.array(list(range(20)), pa.int64()),
            "prompt": pa.array([[1, 2]] * 20, pa.list_(pa.int64())),
            "answer": pa.array([{"a": 1}] * 20),
        }
    )
    pq.write_table(wrong, corpus.hostile_in / "wrong_types.parquet")
    for r in range(20):
        corpus.planted[("wrong_types.parquet", r + 1)] = "field 'prompt' is a list, expected text"
    corpus.rows += 20
    corpus.hostile_rows += 20
    (corpus.hostile_in / "corrupt.parquet").write_bytes(b"PAR1" + bytes(rng.randrange(256) for _ in range(300)))
    corpus.planted[("corrupt.parquet", 0)] = "cannot read file"
    corpus.classes.add("unreadable file (corrupt Parquet)")
    corpus.rows += 1
    corpus.hostile_rows += 1

    # A saved datasets folder (two splits): valid rows and hostile values.
    hostile_ds, plants = [], []
    for j in range(30):
        t = template(rng, n)
        n += 1
        t = {
            k: (json.dumps(v) if k == "meta" and not isinstance(v, str) and v is not None else v) for k, v in t.items()
        }
        t["expert_minutes"] = float(t["expert_minutes"])
        kind = j % 3
        if kind == 0:
            t["expert_minutes"] = float("inf")
            reason = "is inf"
        elif kind == 1:
            t["prompt"] = "x" * 100_001
            reason = "over the 100000-character limit"
        else:
            t["domain"] = "poetry"
            reason = "field 'domain' is 'poetry'"
        hostile_ds.append(t)
        plants.append(reason)
    clean = [dict(v, expert_cost_usd=None, meta=None) for v in valid_ds]
    hostile_all = [dict(v, expert_cost_usd=None, meta=None) for v in valid_ds[: len(valid_ds) // 2]]
    for t in hostile_ds:
        hostile_all.append(dict(t, expert_cost_usd=None))
    hostile_all += [dict(v, expert_cost_usd=None, meta=None) for v in valid_ds[len(valid_ds) // 2 :]]
    cols = [
        "task_id",
        "prompt",
        "answer",
        "domain",
        "expert_minutes",
        "expert_cost_usd",
        "created_at",
        "license",
        "meta",
    ]
    features = datasets.Features({c: datasets.Value("float64" if c.startswith("expert") else "string") for c in cols})
    datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_list([{c: r.get(c) for c in cols} for r in hostile_all], features=features),
            "extra": datasets.Dataset.from_list(
                [{c: r.get(c) for c in cols} for r in hostile_ds[:3]], features=features
            ),
        }
    ).save_to_disk(str(corpus.hostile_in / "hf_dict"))
    datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_list([{c: r.get(c) for c in cols} for r in clean], features=features),
        }
    ).save_to_disk(str(corpus.baseline_in / "hf_dict"))
    first = len(valid_ds) // 2
    for j, reason in enumerate(plants):
        corpus.planted[("hf_dict#train", first + j + 1)] = reason
    for j, reason in enumerate(plants[:3]):
        corpus.planted[("hf_dict#extra", j + 1)] = reason
    corpus.rows += len(hostile_all) + 3
    corpus.hostile_rows += len(hostile_ds) + 3
    corpus.baseline_rows += len(clean)
    return n


def _write_specials(corpus: Corpus) -> None:
    """Files an input folder may hold that are not deliveries: each is skipped with a warning."""
    d = corpus.hostile_in
    (d / "notes.txt").write_text("hello")
    (d / "rows.jsonl.zst").write_bytes(b"\x28\xb5\x2f\xfd\x00")
    os.mkfifo(d / "pipe.jsonl")
    (d / "sub").mkdir()
    os.symlink(d, d / "sub" / "loop")  # a link loop
    os.symlink(d / "mixed.jsonl", d / "sub" / "mixed_again.jsonl")  # a second name for a file read already
    os.symlink(d / "missing.jsonl", d / "sub" / "dangling.jsonl")
    (d / "empty.jsonl").write_bytes(b"")
    (d / "blank.jsonl").write_bytes(b"\n \n\t\r\n")
    corpus.skipped = ["notes.txt", "rows.jsonl.zst", "pipe.jsonl", "loop", "mixed_again.jsonl", "dangling.jsonl"]
