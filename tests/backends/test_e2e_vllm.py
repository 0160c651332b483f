"""The real thing, end to end: the CLI, the in-process Beam runner, the
vLLM engine with SmolLM2-135M on this CPU, math-verify, DuckDB.

Kept small (a few tasks, short completions) so the suite stays fast; the
bundled-sample demo (README command one) is the full-size run."""

import json
import re
import subprocess
import sys

import duckdb
import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.vllm

TASKS = [
    {
        "task_id": f"t{i}",
        "source": "probe",
        "domain": "math",
        "prompt": f"Calculate {a} + {b}.",
        "answer": str(a + b),
        "expert_minutes": 2,
        "created_at": "2026-01-01",
    }
    for i, (a, b) in enumerate([(2, 3), (4, 4), (7, 1), (38, 47)])
]
# One code and one rubric task after the malformed line: the real engine
# writes the code (run in the sandbox) and judges the rubric.
OTHER_DOMAINS = [
    {
        "task_id": "c0",
        "source": "probe",
        "domain": "code",
        "prompt": "Write a Python function add(a, b) that returns a + b.",
        "entry_point": "add",
        "tests": "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-1, 1) == 0\n    assert candidate(10, 5) == 15\n",
        "reference_solution": "def add(a, b):\n    return a + b\n",
        "expert_minutes": 5,
    },
    {
        "task_id": "r0",
        "source": "probe",
        "domain": "rubric",
        "prompt": "Write one sentence about rain.",
        "rubric": ["mentions rain", "is one sentence"],
        "expert_minutes": 1,
    },
]
CONFIG = """
[sampling]
k = 4
waves = [2, 2]
max_tokens = 64
tasks_per_batch = 8
[model]
max_model_len = 512
kv_cache_gib = 0.5
"""


@pytest.fixture(scope="module")
def vllm_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("e2e")
    lines = [json.dumps(t) for t in TASKS]
    lines.append(
        json.dumps(dict(TASKS[0], task_id="dup-of-t0", prompt="  calculate 2 +  3. ", created_at="2026-02-01"))
    )
    lines.append('{"task_id": "broken", "prompt": ')
    lines += [json.dumps(t) for t in OTHER_DOMAINS]
    (d / "delivery.jsonl").write_text("\n".join(lines) + "\n")
    (d / "cfg.toml").write_text(CONFIG)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tasksieve.pipeline.cli",
            "run",
            "--input",
            str(d / "delivery.jsonl"),
            "--out",
            str(d / "out"),
            "--config",
            str(d / "cfg.toml"),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    return d / "out", proc


@pytest.mark.slow
def test_run_succeeds_and_prints_the_summary(vllm_run):
    out, proc = vllm_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "row accounting: rows_in 8 == " in proc.stdout and "OK" in proc.stdout
    assert "attempts used" in proc.stdout and "cost per learnable task" in proc.stdout
    # The sampling bar counts attempts: it ends at the attempts really made.
    last = re.findall(
        r"sampling\+verifying: 100%.*?\| (\d+)/(\d+) \[.*?(?:attempt/s|s/attempt), (\d+)/(\d+) tasks decided",
        proc.stderr,
    )
    assert last, proc.stderr[-3000:]
    done, total, decided, tasks = map(int, last[-1])
    assert done == total == pq.read_table(out / "attempts.parquet").num_rows and decided == tasks


def test_attempts_are_real_generations(vllm_run):
    out, _ = vllm_run
    attempts = pq.read_table(out / "attempts.parquet").to_pylist()
    assert attempts
    assert all(a["model_id"].startswith("HuggingFaceTB/SmolLM2-135M-Instruct@") for a in attempts)
    assert all(a["prompt_tokens"] > 10 and a["completion_tokens"] > 0 for a in attempts)
    assert all(a["finish_reason"] in ("stop", "length") for a in attempts)
    assert all(a["gen_seconds"] > 0 for a in attempts)
    assert {a["verifier"] for a in attempts} == {"math", "code", "rubric"}
    # Distinct seeds give distinct samples: within a task, not all alike.
    by_task = {}
    for a in attempts:
        by_task.setdefault(a["content_hash"], set()).add(a["completion"])
    assert any(len(c) > 1 for c in by_task.values())
    assert len({a["seed"] for a in attempts}) == len(attempts)


def test_statuses_agree_with_attempts(vllm_run):
    out, _ = vllm_run
    rows = pq.read_table(out / "results.parquet").to_pylist()
    quarantined = [r for r in rows if r["status"] == "quarantined"]
    assert [(r["line"], r["drop_stage"]) for r in quarantined] == [(6, "read")]  # the unparsable last line
    results = {r["task_id"]: r for r in rows if r["task_id"]}
    assert results["dup-of-t0"]["drop_reason"] == "exact_duplicate"
    attempts = pq.read_table(out / "attempts.parquet").to_pylist()
    for tid in ("t0", "t1", "t2", "t3"):
        r = results[tid]
        mine = [a for a in attempts if a["content_hash"] == r["content_hash"]]
        assert len(mine) == r["n_attempts"] and sum(a["passed"] for a in mine) == r["n_pass"]
        expected = "learnable" if 0 < r["n_pass"] < r["n_attempts"] else ("all_pass" if r["n_pass"] else "all_fail")
        assert r["status"] == expected
        if expected == "learnable":
            assert r["n_attempts"] in (2, 4)  # sequential stopped at a wave boundary
        else:
            assert r["n_attempts"] == 4


def test_funnel_view_reads_back(vllm_run):
    out, _ = vllm_run
    con = duckdb.connect(str(out / "curation.duckdb"), read_only=True)
    rows = con.execute("select stage, rows_in, rows_out from funnel order by stage_order").fetchall()
    con.close()
    assert rows[0] == ("read", 8, 7)
    assert [r[0] for r in rows] == [
        "read",
        "validate",
        "exact_dedup",
        "near_dedup",
        "against_pool",
        "decontaminate",
        "verifier_sanity",
        "sample",
        "classify",
    ]


def test_code_runs_in_the_sandbox_and_the_rubric_is_judged_and_costed(vllm_run):
    out, _ = vllm_run
    con = duckdb.connect(str(out / "curation.duckdb"), read_only=True)
    code = con.execute(
        "select count(*), count(*) filter (where passed or error is not null) from attempts where verifier = 'code'"
    ).fetchone()
    assert code[0] > 0 and code[0] == code[1]  # every failure says why
    judged = con.execute(
        "select count(*), min(judge_prompt_tokens), min(judge_completion_tokens) from attempts "
        "where verifier = 'rubric' and judge_model_id like 'HuggingFaceTB/SmolLM2-135M-Instruct@%'"
    ).fetchone()
    assert judged[0] > 0 and judged[1] > 50 and judged[2] > 0
    # One priced judge row per judged attempt; the gate's own judge calls
    # (probes, graded responses: before any attempt) are priced too, as
    # rows without an attempt.
    per_attempt, gate = con.execute(
        "select count(*) filter (where attempt_idx is not null), "
        "count(*) filter (where attempt_idx is null) from costs "
        "where component = 'judge' and usd > 0"
    ).fetchone()
    assert per_attempt == judged[0] and gate > 0
    con.close()
