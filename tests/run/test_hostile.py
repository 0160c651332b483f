"""The property test of issue 11: over 1,000 hostile rows, generated
deterministically (tests/hostile.py), mixed with valid rows in JSONL,
Parquet and datasets inputs, through `tasksieve run` and `tasksieve
validate` as a user runs them. Attempts come from `--replay` (recorded
completions, verified by the real verifiers), so nothing is sampled.

It checks: exit 0 and no traceback; the rows the generator wrote ==
learnable + all_pass + all_fail + dropped + quarantined, and the run's own
rows_in equals it; every valid row ends as it does in a run without the
hostile rows; every planted row is quarantined with its reason; and
`validate` names exactly the rows `run` quarantines."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import hostile
from bad_input_cases import CASES

TASKSIEVE = [sys.executable, "-m", "tasksieve.pipeline.cli"]


def _cli(*args, timeout=900):
    return subprocess.run([*TASKSIEVE, *args], capture_output=True, text=True, timeout=timeout)


def _run(corpus, inputs: Path, out: Path):
    return _cli(
        "run",
        "--input",
        str(inputs),
        "--out",
        str(out),
        "--replay",
        str(corpus.root / "replay.jsonl"),
        "--sampling",
        "fixed",
        "-k",
        "4",
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    corpus = hostile.build(root)
    hostile_run = _run(corpus, corpus.hostile_in, root / "hostile" / "out")
    baseline_run = _run(corpus, corpus.baseline_in, root / "baseline" / "out")
    validated = _cli("validate", str(corpus.hostile_in), "--out", str(root / "validation"), "--no-data-docs")
    return corpus, hostile_run, baseline_run, validated


def _results(out: Path) -> list[dict]:
    return pq.read_table(out / "results.parquet").to_pylist()


@pytest.mark.slow
def test_the_generator_plants_over_1000_hostile_rows_of_every_class(runs):
    corpus, *_ = runs
    assert corpus.hostile_rows >= 1000
    quarantine_classes = {
        name
        for name, case in CASES.items()
        if case.__name__
        not in (
            "bom_and_line_ends",
            "compressed_and_upper_case",
            "other_files",
            "special_files",
            "link_loop",
            "out_inside_input",
            "missing_input",
            "device_input",
        )
    }
    assert quarantine_classes <= corpus.classes, quarantine_classes - corpus.classes


def test_exit_0_no_traceback_and_skipped_files_named(runs):
    corpus, run, baseline, _ = runs
    for proc in (run, baseline):
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "Traceback" not in proc.stderr and "ERROR" not in proc.stderr, proc.stderr[-3000:]
    warnings = [ln for ln in run.stderr.splitlines() if ln.startswith("tasksieve: warning: skipping")]
    for name in corpus.skipped:
        assert any(f"/{name}:" in w for w in warnings), (name, warnings)


def test_every_row_the_generator_wrote_is_accounted_for(runs):
    corpus, run, baseline, _ = runs
    rows = _results(corpus.root / "hostile" / "out")
    statuses = {
        s: sum(r["status"] == s for r in rows) for s in ("learnable", "all_pass", "all_fail", "dropped", "quarantined")
    }
    assert len(rows) == sum(statuses.values()) == corpus.rows
    m = re.search(
        r"row accounting: rows_in (\d+) == learnable (\d+) \+ all_pass (\d+) \+ all_fail (\d+) \+ "
        r"dropped (\d+) \+ quarantined (\d+)  OK",
        run.stdout,
    )
    assert m, run.stdout[-2000:]
    assert [int(x) for x in m.groups()] == [corpus.rows, *statuses.values()]
    assert len(_results(corpus.root / "baseline" / "out")) == corpus.baseline_rows
    quarantine = pq.read_table(corpus.root / "hostile" / "out" / "quarantine.parquet").to_pylist()
    assert len(quarantine) == statuses["quarantined"]
    assert all(len(q["reason"]) <= 300 and len(q["raw"] or "") <= 2000 for q in quarantine)


def test_valid_rows_end_as_they_do_without_the_hostile_rows(runs):
    corpus, *_ = runs
    key = lambda r: (r["status"], r["drop_stage"], r["drop_reason"], r["n_attempts"], r["n_pass"])
    with_hostile = {
        r["task_id"]: key(r) for r in _results(corpus.root / "hostile" / "out") if r["task_id"] in corpus.valid
    }
    without = {r["task_id"]: key(r) for r in _results(corpus.root / "baseline" / "out")}
    assert set(with_hostile) == set(without) == set(corpus.valid)
    assert with_hostile == without
    assert {t: s[0] for t, s in without.items()} == corpus.valid  # learnable / all_pass / all_fail, as recorded


def test_every_planted_row_is_quarantined_with_its_reason(runs):
    corpus, *_ = runs
    got = {(Path(r["source_file"]).name, r["line"]): r for r in _results(corpus.root / "hostile" / "out")}
    for where, reason in corpus.planted.items():
        row = got[where]
        assert row["status"] == "quarantined", (where, row["status"], row["drop_reason"])
        assert reason in row["drop_reason"], (where, reason, row["drop_reason"])


def test_validate_names_exactly_the_rows_run_quarantines(runs):
    corpus, _, _, validated = runs
    assert validated.returncode == 1, validated.stderr[-3000:]  # not acceptable, and no crash
    assert "Traceback" not in validated.stderr
    assert validated.stdout.strip().splitlines()[-1].startswith("VERDICT: NOT ACCEPTABLE")
    summary = json.loads((corpus.root / "validation" / "summary.json").read_text())
    flagged = {o["where"] for c in summary["checks"] for o in c["offenders"] if o.get("stage")}
    quarantined = {
        f"{r['source_file']}:{r['line']}"
        for r in _results(corpus.root / "hostile" / "out")
        if r["status"] == "quarantined"
    }
    assert flagged == quarantined
    assert summary["delivery"]["rows_read"] == corpus.rows
