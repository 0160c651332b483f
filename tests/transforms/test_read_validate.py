import json
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tasksieve.transforms.read import InputError, expand_inputs, read_jsonl, read_source
from tasksieve.transforms.validate import first_by_position, quarantine_row, validate_row

GOOD = {"task_id": "t1", "domain": "math", "prompt": "What is 2 + 2?", "answer": "4"}


def _raw(record, error=None, source_file="/d/vendor_x.jsonl", line=1):
    return {"source_file": source_file, "line": line, "record": record, "raw": json.dumps(record), "error": error}


def test_jsonl_reader_reports_each_kind_of_broken_line(tmp_path):
    f = tmp_path / "d.jsonl"
    f.write_bytes(
        b"\n".join(
            [
                json.dumps(GOOD).encode(),
                b'{"task_id": "x", "prompt": ',
                b"[1, 2]",
                b"",
                b'{"prompt": "caf\xe9"}',
                b"x" * 200,
                b'{"task_id": "last", "prompt": "cut',
            ]
        )
    )
    rows = list(read_jsonl(str(f), max_row_bytes=100))
    assert [r["line"] for r in rows] == [1, 2, 3, 5, 6, 7]  # blank line 4 is layout
    assert rows[0]["error"] is None and rows[0]["record"]["task_id"] == "t1"
    assert rows[1]["error"].startswith("malformed JSON")
    assert "JSON list" in rows[2]["error"]
    assert "invalid UTF-8" in rows[3]["error"]
    assert "over the 100-byte limit" in rows[4]["error"]
    assert rows[5]["error"].startswith("truncated last line")


def test_parquet_and_datasets_folders_read_with_row_numbers(tmp_path):
    import datasets

    pq.write_table(pa.Table.from_pylist([GOOD, dict(GOOD, task_id="t2")]), tmp_path / "a.parquet")
    datasets.Dataset.from_list([dict(GOOD, task_id="t3")]).save_to_disk(str(tmp_path / "hf"))
    paths = expand_inputs([str(tmp_path)])
    assert paths == [str(tmp_path / "a.parquet"), str(tmp_path / "hf")]
    rows = [r for p in paths for r in read_source(p, 10_000)]
    assert [(r["record"]["task_id"], r["line"]) for r in rows] == [("t1", 1), ("t2", 2), ("t3", 1)]


def test_missing_input_fails_fast(tmp_path):
    with pytest.raises(InputError, match="input not found"):
        expand_inputs([str(tmp_path / "nope.jsonl")])
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(InputError, match="unknown format"):
        expand_inputs([str(tmp_path / "notes.txt")])


def test_corrupt_parquet_becomes_one_quarantinable_row(tmp_path):
    f = tmp_path / "broken.parquet"
    f.write_bytes(b"PAR1 this is not parquet")
    rows = list(read_source(str(f), 10_000))
    assert len(rows) == 1 and rows[0]["error"].startswith("cannot read file")


@pytest.mark.parametrize(
    "change,reason",
    [
        ({"prompt": ""}, "'prompt' is missing or empty"),
        ({"prompt": None}, "'prompt' is missing or empty"),
        ({"prompt": 42}, "'prompt' is a number"),
        ({"task_id": None}, "'task_id' is missing"),
        ({"domain": "poetry"}, "'domain' is 'poetry'"),
        ({"answer": None}, "math task has no 'answer'"),
        ({"domain": "code"}, "code task has no 'tests'"),
        ({"expert_minutes": -3}, "'expert_minutes' is negative"),
        ({"expert_minutes": "ten"}, "'expert_minutes' is 'ten'"),
        ({"expert_cost_usd": float("nan")}, "'expert_cost_usd' is nan"),
        ({"created_at": "last tuesday"}, "expected an ISO 8601 date"),
        ({"prompt": "x" * 101}, "over the 100-character limit"),
        ({"rubric": [1, 2]}, "list of criteria"),
        ({"meta": [1]}, "'meta' is a list"),
    ],
)
def test_validate_quarantines_with_an_actionable_reason(change, reason):
    task, why = validate_row(_raw(dict(GOOD, **change)), max_field_chars=100)
    assert task is None
    assert reason in why


def test_validate_is_lenient_where_intent_is_clear():
    task, why = validate_row(
        _raw({"task_id": 7, "prompt": "2+2?", "answer": 4, "expert_minutes": "3.5", "vendor_difficulty": "easy"}),
        max_field_chars=1000,
    )
    assert why is None
    assert task["task_id"] == "7" and task["answer"] == "4" and task["domain"] == "math"
    assert task["expert_minutes"] == 3.5
    assert task["source"] == "vendor_x" and task["batch_id"] == "vendor_x"  # named after the file
    assert json.loads(task["meta"]) == {"extra": {"vendor_difficulty": "easy"}}  # unknown columns kept
    task, why = validate_row(_raw(dict(GOOD, domain=None)), max_field_chars=1000)  # Parquet writes null
    assert why is None and task["domain"] == "math"


def test_read_errors_pass_through_validate_as_read_stage():
    raw = {"source_file": "f.jsonl", "line": 3, "record": None, "raw": "{bad", "error": "malformed JSON: x"}
    task, why = validate_row(raw, 100)
    assert task is None and why == "malformed JSON: x"
    q = quarantine_row(raw, why)
    assert q["stage"] == "read" and q["line"] == 3
    q2 = quarantine_row(_raw(dict(GOOD, prompt="")), "empty")
    assert q2["stage"] == "validate" and q2["task_id"] == "t1"


def test_repeated_task_id_keeps_first_in_delivery_order():
    rows = [
        dict(GOOD, source_file="b.jsonl", line=1),
        dict(GOOD, source_file="a.jsonl", line=9),
        dict(GOOD, source_file="a.jsonl", line=2),
    ]
    first, rest = first_by_position(rows)
    assert (first["source_file"], first["line"]) == ("a.jsonl", 2)
    assert len(rest) == 2


def test_check_value_refuses_the_same_with_and_without_its_flat_shortcut(monkeypatch):
    """check_value skips its walk for flat objects of plain values (most
    rows); whatever a row holds, the verdict must be the walk's."""
    from tasksieve.transforms import read
    from tasksieve.transforms.sources import values as row_values

    long_number = json.loads('{"n": 1' + "0" * 200 + "}", parse_int=row_values._parse_int)
    rng = random.Random(5)
    pool = ["x", "é", "x\ud800", 7, 10**400, -(10**90), 1.5, True, None, [], {"a": 1}, [[[]]], long_number["n"]]
    keys = ["a", "b", "ключ", "k\udc00"]
    values = [
        {"a": "x\ud800"},
        {"k\udc00": "v"},
        {"n": 10**400},
        long_number,
        {"ok": "é"},
        {},
        "top\ud800",
        5,
        {"f": 1.5, "b": True, "z": None, "i": 10**50},
    ]
    values += [{rng.choice(keys) + str(i): rng.choice(pool) for i in range(rng.randint(0, 4))} for _ in range(400)]

    def verdict(v):
        try:
            read.check_value(v, "f")
            return None
        except read.RowLimitError as e:
            return str(e)

    shortcut = [verdict(v) for v in values]
    monkeypatch.setattr(row_values, "_plain_object", lambda v: False)
    assert shortcut == [verdict(v) for v in values]
    assert sum(x is None for x in shortcut) > 50 and sum(x is not None for x in shortcut) > 50


def _plain_physical_lines(data: bytes, chunk: int, max_row_bytes: int, keep: int):
    """The line splitter as one state machine, a line at a time: what
    read.physical_lines gave before its fast path for whole short lines."""
    sep, kept, length, lineno, out = None, bytearray(), 0, 0, []

    def add(part):
        nonlocal length, kept
        collecting = length <= max_row_bytes
        length += len(part)
        if collecting:
            kept.extend(part)
            if length > max_row_bytes:
                del kept[keep:]

    def emit(terminated):
        nonlocal kept, length, lineno
        lineno += 1
        d, full = bytes(kept), length
        if sep == b"\n" and d.endswith(b"\r") and full <= max_row_bytes:
            d, full = d[:-1], full - 1
        kept, length = bytearray(), 0
        out.append((lineno, d, full, terminated))

    for i in range(0, len(data), chunk):
        c = data[i : i + chunk]
        if i == 0 and c.startswith(b"\xef\xbb\xbf"):
            c = c[3:]
        if sep is None:
            if not (b"\n" in c or b"\r" in c):
                add(c)
                continue
            sep = b"\r" if b"\r" in c and b"\n" not in c else b"\n"
        parts = c.split(sep)
        for part in parts[:-1]:
            add(part)
            emit(True)
        add(parts[-1])
    if length:
        emit(False)
    return out


@pytest.mark.parametrize("seed", range(40))
def test_physical_lines_fast_path_splits_as_the_plain_state_machine(seed, monkeypatch):
    """Lines split, numbered, cut at the limit and told blank the same way,
    whatever the line ends (LF, CRLF, CR, mixed), the chunk boundaries and
    the limit: the reader's and the independent counter's rows depend on it."""
    import io

    from tasksieve.transforms import read

    rng = random.Random(seed)
    pieces = [b"\n", b"\r\n", b"\r", b" ", b"\t", b"x", b"{}", b"\xef\xbb\xbf", b"long" * 30, b"\xe9"]
    data = (b"\xef\xbb\xbf" if rng.random() < 0.3 else b"") + b"".join(
        rng.choice(pieces) for _ in range(rng.randrange(0, 400))
    )
    chunk = rng.choice([1, 3, 7, 16, 64, 1 << 20])
    max_row_bytes = rng.choice([1, 4, 20, 100, 10**6])
    monkeypatch.setattr(read, "_CHUNK", chunk)
    monkeypatch.setattr(read, "RAW_KEEP_CHARS", rng.choice([1, 2, 2000]))
    got = list(read.physical_lines(io.BytesIO(data), max_row_bytes))
    assert got == _plain_physical_lines(data, chunk, max_row_bytes, read.RAW_KEEP_CHARS * 4)
    blank = [n for n, d, full, _ in got if read.is_blank(d, full)]
    path = f"/nonexistent/{seed}.jsonl"
    monkeypatch.setattr(read, "_open_jsonl", lambda p: io.BytesIO(data))
    monkeypatch.setattr(read, "source_verdict", lambda p: (None, None))  # no file to check: the count alone
    assert read.count_rows(path, max_row_bytes) == len(got) - len(blank)
