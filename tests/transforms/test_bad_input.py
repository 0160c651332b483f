"""README's "What happens to bad input" table, checked row by row against
the code: every class of bad input the table lists has a case in
bad_input_cases.py, and each case produces exactly the reason (or warning,
or refusal) the table shows. The same classes, mixed with random mutations
and valid rows, go end to end in test_hostile.py."""

import re
from pathlib import Path

import pytest

from bad_input_cases import CASES
from tasksieve.pipeline.run.errors import RunError
from tasksieve.pipeline.run.folders import inputs_and_output
from tasksieve.pipeline.validate.delivery_checks import read_delivery
from tasksieve.transforms.read import expand_inputs

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_table() -> dict[str, str | None]:
    """First cell -> the example in the last cell (between backticks), or None."""
    text = README.read_text(encoding="utf-8")
    section = text.split("### What happens to bad input", 1)[1].split("\n#", 1)[0]
    rows = {}
    for ln in section.splitlines():
        if not ln.startswith("| ") or ln.startswith("| input ") or ln.startswith("|---"):
            continue
        cells = [c.strip() for c in ln.strip().strip("|").split(" | ")]
        example = re.findall(r"`([^`]*)`", cells[-1]) if len(cells) >= 3 else []
        rows[cells[0]] = example[0] if example else None
    return rows


def _matches(actual: str, example: str) -> bool:
    return actual.startswith(example[:-3]) if example.endswith("...") else actual == example


def test_readme_table_lists_exactly_the_tested_classes():
    assert set(readme_table()) == set(CASES)


@pytest.mark.parametrize("name", list(CASES))
def test_each_class_of_bad_input_does_what_the_readme_says(name, tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    paths, expected = CASES[name](d)
    example = readme_table()[name]
    show = lambda text: text.replace(str(d), "d")  # the README writes the folder as d
    kind = expected[0]
    if kind == "refuse":
        with pytest.raises(RunError) as e:
            inputs_and_output(paths, str(d / "out"))
        line = "tasksieve: error: " + show(str(e.value))
        assert expected[1] in line and "\n" not in line
        if example:
            assert _matches(line, example), line
        return
    warnings: list[str] = []
    files = expand_inputs(paths, warn=warnings.append)
    raws, tasks, failures = read_delivery(files, 1_000_000, 100_000)
    assert len(raws) == len(tasks) + len(failures)
    if kind == "quarantine":
        _, stage, _ = expected
        assert len(failures) == 1, failures
        f = failures[0]
        assert f["stage"] == stage
        assert len(f["reason"]) <= 300
        assert _matches(f["reason"], example), (f["reason"], example)
        assert len(tasks) == len(raws) - 1  # the file's other rows are read
    elif kind == "read":
        assert not failures and len(tasks) == expected[1]
    else:  # skip
        assert not failures and len(tasks) == 1  # the delivery beside the skipped files
        shown = ["tasksieve: warning: " + show(w) for w in warnings]
        for part in expected[1]:
            assert any(part in w for w in shown), (part, shown)
        assert any(_matches(w, example) for w in shown), (example, shown)


@pytest.mark.slow
def test_a_reader_that_skips_rows_fails_the_accounting_check(sample_dir, tmp_path, monkeypatch):
    """rows_in is counted without the reader, so a reader that gives up on
    the rest of a file (as the old one did on a deeply nested line) cannot
    pass the check."""
    import tasksieve.transforms.read as read_module
    from tasksieve.pipeline.run.command import dedup
    from tasksieve.pipeline.outputs.finalize import AccountingError
    from tasksieve.schemas.config import RunConfig

    real = read_module.read_source

    def gives_up_after_line_5(path, max_row_bytes):
        for row in real(path, max_row_bytes):
            if path.endswith(".jsonl") and row["line"] > 5:
                return
            yield row

    monkeypatch.setattr(read_module, "read_source", gives_up_after_line_5)
    with pytest.raises(
        AccountingError, match=r"98 rows read but \d+ rows accounted for .*the reader produced \d+ rows"
    ):
        dedup([str(sample_dir)], str(tmp_path / "out"), RunConfig())
