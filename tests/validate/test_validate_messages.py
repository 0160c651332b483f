"""Validation messages name the real missing field, each offender once per
check, and file:line wherever a row is named: the console, summary.json,
the vendor's report.html and the run report's quarantine table (issue 47)."""

import json
import re

import pytest

from tasksieve.pipeline.validate.command import validate_delivery
from tasksieve.transforms.validate import validate_row

ROWS = [
    {"task_id": "v-001", "prompt": "What is 2 + 2?", "answer": "4", "license": "MIT"},
    {"task_id": "v-004", "prompt": "What is 3 + 3?", "license": "MIT"},  # no answer, no domain
    {"task_id": "v-005", "prompt": "What is 3 + 5?", "answer": "8", "license": "MIT", "expert_minutes": -3},
    {"task_id": "v-006", "prompt": "Write f.", "tests": "assert f() == 1", "entry_point": "f", "license": "MIT"},
]


def test_a_row_missing_its_answer_is_blamed_on_its_answer_not_its_domain():
    task, why = validate_row({"record": ROWS[1], "source_file": "x.jsonl", "line": 2}, 100_000)
    assert task is None and "'answer'" in why and "domain" not in why.split(";")[0], why
    # A row that has code fields but no domain does lack its domain.
    task, why = validate_row({"record": ROWS[3], "source_file": "x.jsonl", "line": 4}, 100_000)
    assert task is None and why.startswith("field 'domain' is None"), why


@pytest.mark.slow
def test_each_offender_once_per_check_named_with_file_and_line(tmp_path, capsys):
    delivery = tmp_path / "x.jsonl"
    delivery.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    s = validate_delivery([str(delivery)], tmp_path / "out", data_docs=False)
    console = capsys.readouterr().out
    by = {c["name"]: c for c in s["checks"]}
    schema = by["schema"]["offenders"]
    v004 = [o for o in schema if o["task_id"] == "v-004"]
    assert len(v004) == 1, schema
    assert v004[0]["where"] == f"{delivery}:2"
    assert "'answer'" in v004[0]["reason"] and "'domain' is None" not in v004[0]["reason"], v004
    for c in s["checks"]:
        keys = [(o["where"], o["task_id"]) for o in c["offenders"]]
        assert len(keys) == len(set(keys)), (c["name"], keys)
    assert [o["task_id"] for o in by["ranges"]["offenders"]] == ["v-005"]
    # The console names each row with its file:line, once.
    row = next(line for line in console.splitlines() if line.startswith("ranges"))
    assert row.count("v-005") == 1 and f"v-005 ({delivery}:3)" in row, row
    schema_row = next(line for line in console.splitlines() if line.startswith("schema"))
    assert schema_row.count("v-004") == 1 and f"{delivery}:2" in schema_row, schema_row
    page = (tmp_path / "out" / "report.html").read_text()
    assert page.count(">v-005<") == 1  # ranges, once
    assert f"{delivery}:3" in page


@pytest.mark.slow
def test_the_run_reports_quarantine_table_names_file_and_line(tmp_path):
    """`tasksieve dedup` quarantines the bad rows; `tasksieve report` lists
    them with the file:line they came from."""
    import subprocess
    import sys

    delivery = tmp_path / "x.jsonl"
    delivery.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    cli = [sys.executable, "-m", "tasksieve.pipeline.cli"]
    p = subprocess.run(
        [*cli, "dedup", "--input", str(delivery), "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    p = subprocess.run([*cli, "report", str(tmp_path / "o")], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    page = (tmp_path / "o" / "report.html").read_text()
    table = re.search(r'id="table-dropped".*?</table>', page, re.S).group(0)
    assert "<th>file:line</th>" in table
    assert f"{delivery}:2" in table and f"{delivery}:3" in table, table
