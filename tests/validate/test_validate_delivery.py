"""`tasksieve validate`: each check fails for the right reason and names
its offenders; a clean delivery passes; exit codes 0/1/2 from the CLI.

Most cases run in-process (GX and the benchmark index load once); the exit
codes go through a subprocess, as a vendor meets them."""

import json
import subprocess
import sys

import pytest

from tasksieve.pipeline.validate.command import ProbeSpec, UsageError, validate_delivery
from tasksieve.schemas.config import RunConfig
from tasksieve.transforms.decontam.benchmarks import bench_data_path, read_jsonl

TASKSIEVE = [sys.executable, "-m", "tasksieve.pipeline.cli"]

GOOD = [
    {
        "task_id": "g1",
        "prompt": "Calculate 3 + 5 and give the result.",
        "answer": "8",
        "license": "MIT",
        "created_at": "2026-01-02",
        "expert_minutes": 3,
    },
    {
        "task_id": "g2",
        "domain": "code",
        "prompt": "Write add(a, b) returning the sum of two integers.",
        "tests": "assert add(1, 2) == 3\nassert add(-4, 1) == -3",
        "entry_point": "add",
        "reference_solution": "def add(a, b):\n    return a + b\n",
        "license": "MIT",
        "created_at": "2026-01-02T10:00:00Z",
        "expert_cost_usd": 12.5,
    },
    {
        "task_id": "g3",
        "domain": "rubric",
        "prompt": "Write a short poem about the sea, with rhyme.",
        "rubric": ["rhymes", "mentions the sea"],
        "license": "CC0-1.0",
        "created_at": "2026-01-03",
    },
    {
        "task_id": "g4",
        "domain": "exact",
        "prompt": "What is the capital city of France?",
        "answer": "Paris",
        "license": "CC-BY-4.0",
        "created_at": "2026-01-03",
    },
]


def _gsm8k_question(i=0):
    return list(read_jsonl(bench_data_path("gsm8k", "test.jsonl")))[i]["question"]


def _write(path, rows, tail=""):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + tail, encoding="utf-8")
    return path


def _bad(**fields):
    return dict(
        {
            "task_id": "bad",
            "prompt": "Calculate 6 + 2 and give the result.",
            "answer": "8",
            "license": "MIT",
            "created_at": "2026-01-04",
        },
        **fields,
    )


# (case, extra rows, raw tail text, the one check that must fail, what its offender says)
CASES = [
    ("malformed_row", [], '{"task_id": "trunc", "prompt": "Calcul', "schema", "truncated last line"),
    ("contract_violation", [_bad(answer=None)], "", "schema", "math task has no 'answer'"),
    ("wrong_type", [_bad(prompt=12345678901)], "", "schema", "prompt"),
    ("duplicate_task_id", [_bad(task_id="g1")], "", "schema", "task_id is unique"),
    (
        "duplicate_within",
        [_bad(task_id="copy", prompt="  CALCULATE 3 +  5 and give the result. ", answer="8", created_at="2026-02-01")],
        "",
        "duplicates_within",
        "same prompt and reference as g1",
    ),
    ("contamination", [_bad(prompt=None, answer="18")], "", "contamination", "gsm8k"),
    (
        "broken_verifier_code",
        [
            _bad(
                domain="code",
                answer=None,
                tests="assert add(1, 2) == 3 +",
                entry_point="add",
                reference_solution="def add(a, b): return a + b",
            )
        ],
        "",
        "verifier_sanity",
        "tests do not compile",
    ),
    (
        "broken_verifier_echo",
        [_bad(prompt="Add 4 and 3. The answer is 7", answer="7")],
        "",
        "verifier_sanity",
        "probe 'echo_prompt' passes the verifier",
    ),
    ("bad_license", [_bad(license="GPL-3.0")], "", "license", "license is one of"),
    ("missing_license", [_bad(license=None)], "", "license", "names its license"),
    ("bad_range", [_bad(expert_minutes=5000)], "", "ranges", "expert_minutes is 0.5..600"),
    ("bad_date_format", [_bad(created_at="01/04/2026")], "", "dates", "ISO 8601"),
    ("implausible_date", [_bad(created_at="1970-01-01")], "", "dates", "created_at is between"),
]


@pytest.mark.slow
def test_field_check_offenders_are_the_rows_that_fail_wherever_they_are(tmp_path):
    """GX names failing rows by the frame's index (expectations.delivery_frame);
    each must come back as its own file:line and task_id, past an
    unparseable line (which has no row in the frame)."""
    lines = [
        json.dumps(GOOD[0]),
        '{"task_id": "broken", "prompt": "no closing brace"',
        json.dumps(_bad(task_id="L1", license=None)),
        json.dumps(GOOD[1]),
        json.dumps(_bad(task_id="R1", expert_minutes=5000)),
        json.dumps(_bad(task_id="L2", license="GPL-3.0")),
        json.dumps(_bad(task_id="D1", created_at="1970-01-01")),
        json.dumps(GOOD[2]),
    ]
    delivery = tmp_path / "d.jsonl"
    delivery.write_text("\n".join(lines) + "\n", encoding="utf-8")
    s = validate_delivery([str(delivery)], tmp_path / "out", data_docs=False, echo=False)
    by_check = {c["name"]: c for c in s["checks"]}
    expected = {"license": {3: "L1", 6: "L2"}, "ranges": {5: "R1"}, "dates": {7: "D1"}}
    for name, rows in expected.items():
        got = {(o["where"], o["task_id"]) for o in by_check[name]["offenders"]}
        assert got == {(f"{delivery}:{line}", task_id) for line, task_id in rows.items()}, (name, got)
    assert any(o["where"] == f"{delivery}:2" for o in by_check["schema"]["offenders"])


@pytest.mark.slow
@pytest.mark.parametrize("case,rows,tail,check,reason", CASES, ids=[c[0] for c in CASES])
def test_each_check_fails_for_the_right_reason(tmp_path, case, rows, tail, check, reason):
    rows = [dict(r, prompt=_gsm8k_question()) if r.get("prompt", "x") is None else r for r in rows]
    delivery = _write(tmp_path / "d.jsonl", GOOD + rows, tail)
    s = validate_delivery([str(delivery)], tmp_path / "out", data_docs=False, echo=False)
    assert s["verdict"] == "NOT ACCEPTABLE"
    assert s["failed_checks"] == [check]
    failed = next(c for c in s["checks"] if c["name"] == check)
    assert failed["status"] == "fail" and failed["offenders"]
    # The offender is named by task_id, or by file:line when the row has none.
    bad_line = len(GOOD) + 1
    for o in failed["offenders"]:
        assert o["where"] == f"{delivery}:{bad_line}" or (case == "duplicate_task_id" and o["task_id"] == "g1")
    assert any(reason in o["reason"] for o in failed["offenders"]), failed["offenders"]
    if tail:  # a row that never parsed has no id: its line number identifies it
        assert failed["offenders"][0]["task_id"] is None
    elif case != "duplicate_task_id":
        assert {o["task_id"] for o in failed["offenders"]} == {rows[0]["task_id"]}
    on_disk = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert on_disk["failed_checks"] == [check]


def test_contamination_names_its_evidence(tmp_path):
    delivery = _write(tmp_path / "d.jsonl", GOOD + [_bad(prompt=_gsm8k_question(7))])
    s = validate_delivery([str(delivery)], tmp_path / "out", data_docs=False, echo=False)
    (o,) = next(c for c in s["checks"] if c["name"] == "contamination")["offenders"]
    assert o["benchmark"] == "gsm8k" and o["benchmark_item"] == "test/7"
    # The run's n-gram length: the profile reuses the run's [decontam] section.
    assert len(o["ngram"].split()) == RunConfig().decontam.ngram == 8


def test_duplicate_against_the_pool(tmp_path):
    delivery = _write(tmp_path / "d.jsonl", GOOD)
    pool = _write(tmp_path / "pool.jsonl", [dict(GOOD[3], task_id="P-9", prompt="what is the CAPITAL city of france?")])
    s = validate_delivery([str(delivery)], tmp_path / "out", against=[str(pool)], data_docs=False, echo=False)
    assert s["failed_checks"] == ["duplicates_against_pool"]
    (o,) = next(c for c in s["checks"] if c["name"] == "duplicates_against_pool")["offenders"]
    assert o["task_id"] == "g4" and o["duplicate_of"] == "P-9" and o["duplicate_of_where"] == f"{pool}:1"
    assert o["where"] == f"{delivery}:4"


@pytest.mark.slow
def test_summary_lists_offenders_for_every_failed_check(tmp_path):
    """One delivery with every problem at once: each failed check in
    summary.json names its rows."""
    rows = GOOD + [r for _, rs, _, _, _ in CASES for r in rs]
    rows = [dict(r, task_id=f"{r['task_id']}-{i}") if r["task_id"] == "bad" else r for i, r in enumerate(rows)]
    rows = [dict(r, prompt=_gsm8k_question()) if r.get("prompt", "x") is None else r for r in rows]
    delivery = _write(tmp_path / "all.jsonl", rows, CASES[0][2])
    pool = _write(tmp_path / "pool.jsonl", [dict(GOOD[0], task_id="P-1")])
    s = validate_delivery([str(delivery)], tmp_path / "out", against=[str(pool)], echo=False)
    on_disk = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert set(on_disk["failed_checks"]) == {
        "schema",
        "license",
        "ranges",
        "dates",
        "duplicates_within",
        "duplicates_against_pool",
        "contamination",
        "verifier_sanity",
    }
    for c in on_disk["checks"]:
        assert {"name", "observed", "threshold", "status", "offenders"} <= set(c)
        if c["status"] == "fail":
            assert c["offenders"], c["name"]
            for o in c["offenders"]:
                assert o["task_id"] or o["where"].rsplit(":", 1)[1].isdigit()
                assert o["where"].startswith(str(delivery))
    truncated = [o for o in on_disk["checks"][0]["offenders"] if o["task_id"] is None]
    assert truncated and truncated[0]["where"] == f"{delivery}:{len(rows) + 1}"
    report = (tmp_path / "out" / "report.html").read_text()
    assert "NOT ACCEPTABLE" in report and "<style>" in report
    assert "http://" not in report and "https://" not in report and "<script" not in report
    assert s["data_docs"]["built"] and (tmp_path / "out" / "data_docs" / "index.html").is_file()
    # GX's own pages name the failing rows by file:line too.
    (missing,) = [
        o
        for c in on_disk["checks"]
        if c["name"] == "license"
        for o in c["offenders"]
        if "names its license" in o["reason"]
    ]
    pages = "".join(p.read_text() for p in (tmp_path / "out" / "data_docs" / "validations").rglob("*.html"))
    assert missing["where"] in pages


def test_clean_delivery_is_acceptable_from_other_formats(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    # A table has every column in every row: spell out g1's domain.
    keys = sorted({k for r in GOOD for k in r})
    rows = [dict({k: r.get(k) for k in keys}, domain=r.get("domain", "math")) for r in GOOD]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "d.parquet")
    s = validate_delivery([str(tmp_path / "d.parquet")], tmp_path / "out", data_docs=False, echo=False)
    assert s["acceptable"], s["failed_checks"]
    assert s["delivery"]["valid_tasks"] == 4


def test_profile_thresholds_decide(tmp_path):
    delivery = _write(tmp_path / "d.jsonl", GOOD + [_bad(license="GPL-3.0")])
    profile = tmp_path / "p.toml"
    profile.write_text('[fields]\nallowed_licenses = ["MIT", "CC0-1.0", "CC-BY-4.0", "GPL-3.0"]\n')
    s = validate_delivery([str(delivery)], tmp_path / "out", profile_path=str(profile), data_docs=False, echo=False)
    assert s["acceptable"], s["failed_checks"]
    profile.write_text("[thresholds]\nmax_duplicate_rat = 0.5\n")
    with pytest.raises(UsageError, match="thresholds.max_duplicate_rat"):
        validate_delivery([str(delivery)], tmp_path / "out", profile_path=str(profile), echo=False)


# --- the difficulty probe, with the scripted backend --------------------------------------------


def test_probe_reports_shares_and_tokens(tmp_path):
    from fakes import ScriptedBackend

    tasks = [
        {"task_id": f"p{i}", "prompt": f"Calculate {e}.", "answer": str(v), "license": "MIT"}
        for i, (e, v) in enumerate([("3 + 5", 8), ("3 * 5", 15), ("7 - 2", 5), ("2 + 6", 8)])
    ]
    delivery = _write(tmp_path / "d.jsonl", tasks)
    backend = ScriptedBackend()
    probe = ProbeSpec(model="scripted", k=4, config=RunConfig())
    s = validate_delivery(
        [str(delivery)], tmp_path / "out", probe=probe, backend_factory=lambda: backend, data_docs=False, echo=False
    )
    c = next(c for c in s["checks"] if c["name"] == "learnable_share")
    d = c["details"]
    assert d["probed"] == 4 and d["k"] == 4 and d["attempts"] == 16
    # '+' always right, '*' always wrong, '-' right on even seeds (7 - 2's seeds are mixed).
    assert d["counts"] == {"learnable": 1, "all_pass": 2, "all_fail": 1}
    assert d["prompt_tokens"] == 16 * 20 and d["completion_tokens"] == 16 * 10
    assert c["observed"] == 0.25 and c["status"] == "pass" and s["acceptable"]  # default bar: 20%
    assert {o["task_id"]: o["status"] for o in c["offenders"]} == {"p0": "all_pass", "p1": "all_fail", "p3": "all_pass"}

    profile = tmp_path / "p.toml"
    profile.write_text("[thresholds]\nmin_learnable_share = 0.5\n")
    s = validate_delivery(
        [str(delivery)],
        tmp_path / "out",
        profile_path=str(profile),
        probe=probe,
        backend_factory=lambda: backend,
        data_docs=False,
        echo=False,
    )
    assert s["failed_checks"] == ["learnable_share"]


# --- the command line: exit codes and the verdict line -----------------------------------------


def _cli(*args):
    return subprocess.run([*TASKSIEVE, "validate", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_cli_exit_codes(tmp_path):
    good = _write(tmp_path / "good.jsonl", GOOD)
    bad = _write(tmp_path / "bad.jsonl", GOOD + [_bad(license="GPL-3.0")])
    ok = _cli(str(good), "--out", str(tmp_path / "o1"))
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip().splitlines()[-1] == "VERDICT: ACCEPTABLE"
    assert (tmp_path / "o1" / "report.html").is_file() and (tmp_path / "o1" / "data_docs" / "index.html").is_file()

    no = _cli(str(bad), "--out", str(tmp_path / "o2"), "--no-data-docs")
    assert no.returncode == 1
    assert no.stdout.strip().splitlines()[-1] == "VERDICT: NOT ACCEPTABLE (1 check failed)"

    missing = _cli(str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "o3"))
    assert missing.returncode == 2
    assert [l for l in missing.stderr.splitlines() if l.startswith("tasksieve:")] == [
        f"tasksieve: error: input not found: {tmp_path / 'nope.jsonl'}"
    ]
    profile = tmp_path / "p.toml"
    profile.write_text("[thresholds]\nmax_contaminated = -1\n")
    badprof = _cli(str(good), "--profile", str(profile), "--out", str(tmp_path / "o4"))
    assert badprof.returncode == 2
    err = [l for l in badprof.stderr.splitlines() if l.startswith("tasksieve:")]
    assert len(err) == 1 and "thresholds.max_contaminated" in err[0]
    assert _cli("--out", str(tmp_path)).returncode == 2  # argparse: no delivery given


@pytest.mark.slow
@pytest.mark.vllm
def test_probe_with_the_real_model(tmp_path):
    tasks = [
        {"task_id": f"r{i}", "prompt": f"Calculate {a} + {b}.", "answer": str(a + b), "license": "MIT"}
        for i, (a, b) in enumerate([(2, 3), (4, 4), (7, 1), (38, 47)])
    ]
    delivery = _write(tmp_path / "d.jsonl", tasks)
    cfg = tmp_path / "run.toml"
    cfg.write_text("[sampling]\nmax_tokens = 32\n[model]\nmax_model_len = 512\nkv_cache_gib = 0.5\n")
    p = _cli(
        str(delivery),
        "--out",
        str(tmp_path / "o"),
        "--no-data-docs",
        "--probe-model",
        "default",
        "--probe-k",
        "2",
        "--config",
        str(cfg),
    )
    assert p.returncode in (0, 1), p.stderr[-2000:]
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    d = next(c for c in s["checks"] if c["name"] == "learnable_share")["details"]
    assert d["probed"] == 4 and d["attempts"] == 8 and d["k"] == 2
    assert sum(d["counts"].values()) == 4
    assert d["prompt_tokens"] > 0 and 0 < d["completion_tokens"] <= 8 * 32
    assert p.stdout.strip().splitlines()[-1].startswith("VERDICT: ")


def test_a_check_beside_the_others_hands_back_its_result_or_its_error():
    from tasksieve.pipeline.validate.command import _Beside

    assert _Beside(sorted, [3, 1, 2]).result() == [1, 2, 3]
    with pytest.raises(ZeroDivisionError):
        _Beside(lambda: 1 / 0).result()
    beside = _Beside(sum, [])
    assert beside.result() == 0 and beside._thread.daemon  # a Ctrl-C in the main thread does not wait for it


@pytest.mark.slow
def test_a_vendor_sees_each_step_and_the_sanity_check_count_up(tmp_path, capsys):
    delivery = _write(tmp_path / "d.jsonl", GOOD)
    s = validate_delivery([str(delivery)], tmp_path / "out", data_docs=False)
    err = capsys.readouterr().err
    assert s["acceptable"]
    for step in ("read", "field expectations (GX)", "duplicates and contamination"):
        assert f"validate: {step} done in " in err, err
    assert f"validate: verifier sanity (done): {len(GOOD)} tasks" in err
    validate_delivery([str(delivery)], tmp_path / "quiet", data_docs=False, echo=False)
    assert "validate:" not in capsys.readouterr().err


@pytest.mark.slow
def test_data_docs_are_built_under_a_relative_out(tmp_path, monkeypatch):
    """The default --out is ./validation: GX's file store wants an absolute
    folder, and without one the Data Docs were silently not built."""
    delivery = _write(tmp_path / "d.jsonl", GOOD + [_bad(license="GPL-3.0")])
    monkeypatch.chdir(tmp_path)
    s = validate_delivery([str(delivery)], "validation", echo=False)
    assert s["data_docs"]["built"], s["data_docs"]
    assert (tmp_path / "validation" / "data_docs" / "index.html").is_file()
