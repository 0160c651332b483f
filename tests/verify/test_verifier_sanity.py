"""Verifier sanity: a task whose reference fails its own tests, whose tests
pass a null answer or do not compile is dropped before any attempt is paid
for. Unit checks, then the stage inside the whole graph (scripted backend)."""

import json

import duckdb
import pyarrow.parquet as pq
import pytest

from fakes import ScriptedBackend
from tasksieve.pipeline.run.command import run
from tasksieve.schemas.config import RunConfig
from tasksieve.transforms.stage import DROPPED, KEPT
from tasksieve.transforms.verify import answer_memo
from tasksieve.transforms.verify.sanity import check_verifier, sanity_route

HE_TESTS = "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-1, 1) == 0\n"


def _code(entry="add", tests=HE_TESTS, ref="def add(a, b):\n    return a + b\n", **kw):
    return dict(
        {
            "task_id": entry,
            "domain": "code",
            "entry_point": entry,
            "tests": tests,
            "reference_solution": ref,
            "prompt": f"Write a Python function {entry}(a, b) that returns a + b.",
            "content_hash": entry,
        },
        **kw,
    )


@pytest.mark.slow
def test_working_code_tasks_pass_in_both_test_styles():
    for task in (_code(), _code(tests="assert add(2, 3) == 5\nassert add(0, 0) == 0\n")):
        v = check_verifier(task)
        assert v == {"broken": False, "problems": [], "reasons": [], "executed": True}


@pytest.mark.parametrize(
    "task,reason,says",
    [
        (_code(ref="def add(a, b):\n    return a - b\n"), "reference_fails", "wrong_answer"),
        (_code(ref="def add(a, b):\n    while True:\n        pass\n"), "reference_fails", "timeout"),
        (_code(tests="r = add(2, 1)\nassert r == 3 or r is None\n"), "null_answer_passes", "returning None"),
        (_code(tests="assert isinstance(add(1, 2), (int, str))\n"), "null_answer_passes", "returning ''"),
        (_code(tests="assert 'function' in str(add(1, 2)) or add(1, 2) == 3\n"), "null_answer_passes", "the prompt"),
        (_code(tests="assert add(1, 2) == 3 +\n"), "tests_do_not_compile", "tests do not compile"),
        (_code(ref="def add(a, b)\n    return a + b\n"), "reference_does_not_compile", "does not compile"),
        (_code(ref="def plus(a, b):\n    return a + b\n"), "bad_entry_point", "does not define entry_point"),
        (_code(ref=None), "no_reference", "no reference_solution"),
        (_code(tests="assert True\n"), "null_answer_passes", "`pass`"),
    ],
)
@pytest.mark.slow
def test_broken_code_tasks_are_caught(task, reason, says):
    v = check_verifier(task)
    assert v["broken"] and reason in v["reasons"], v
    assert any(says in p for p in v["problems"]), v


def test_answer_and_rubric_domains():
    assert not check_verifier({"domain": "math", "answer": "8", "prompt": "Calculate 5 + 3."})["broken"]
    echo = check_verifier({"domain": "math", "answer": "7", "prompt": "Add 4 and 3. The answer is 7"})
    assert echo["reasons"] == ["null_answer_passes"]
    assert check_verifier({"domain": "exact", "answer": "/[/", "prompt": "p"})["reasons"] == ["bad_reference"]
    assert check_verifier({"domain": "rubric", "rubric": [" "], "prompt": "p"})["reasons"] == ["no_criteria"]
    assert not check_verifier({"domain": "rubric", "rubric": ["mentions rain"], "prompt": "p"})["broken"]


MATH_TASKS = [
    {"domain": "math", "answer": a, "prompt": p}
    for a, p in [
        ("8", "Calculate 5 + 3."),
        ("7", "Add 4 and 3. The answer is 7"),
        ("3/4", "What fraction is shaded?"),
        ("\\frac{1}{2}", "Halve one."),
        ("x^2 + 1", "Expand."),
        ("-7", "What is 3 - 10?"),
        ("1,000", "Ten hundreds?"),
        ("0.5", "A half as a decimal?"),
        ("hello", "Greet."),
        ("", "No answer given."),
        ("12", "Numbers 1 to 20: pick 12"),
        ("{1, 2}", "Roots of (x-1)(x-2)?"),
        ("\\sqrt{2}", "Diagonal of a unit square?"),
        ("1e3", "Write a thousand."),
        ("}{", "A broken reference."),
        ("???", "Another one."),
    ]
]


def _ask_many_counted(monkeypatch):
    from tasksieve.transforms.verify import math_answers as vm

    calls, ask_many = [], vm._MathWorker.ask_many

    def counted(self, requests, timeout_s):
        calls.append(len(requests))
        return ask_many(self, requests, timeout_s)

    monkeypatch.setattr(vm._MathWorker, "ask_many", counted)
    return vm, calls


def test_math_sanity_asks_the_worker_once_a_task_and_decides_as_answer_by_answer(monkeypatch):
    """A math task's reference and probes have ~15 candidate answers; they go
    to the worker as one batch, and every verdict is what asking them one at
    a time gives."""
    import contextlib

    vm, calls = _ask_many_counted(monkeypatch)
    batched = [check_verifier(t) for t in MATH_TASKS]
    asked = [t for t in MATH_TASKS if (t["answer"] or "").strip()]
    assert len(calls) == len(asked)  # one round trip a task
    batch_requests = sum(calls)
    reasons = {r for v in batched for r in v["reasons"]}
    assert {"null_answer_passes", "reference_fails"} <= reasons, reasons
    calls.clear()
    answer_memo.forget()  # asked again, one by one, none kept (answer_memo.py)
    monkeypatch.setattr(answer_memo, "remember", lambda key, answer: None)
    monkeypatch.setattr(vm, "answered_ahead", lambda *a, **k: contextlib.nullcontext())
    assert [check_verifier(t) for t in MATH_TASKS] == batched
    assert set(calls) == {1} and len(calls) >= 8 * len(asked) > 2 * batch_requests


def test_answers_asked_ahead_stop_at_a_deadline_and_the_rest_are_asked_when_needed(monkeypatch):
    """A candidate that keeps the worker busy past the deadline ends the
    batch there: it is a timeout, as asked alone, and the answers after it
    are asked one by one when verify_math needs them."""
    vm, calls = _ask_many_counted(monkeypatch)
    completions = ["\\boxed{2}", "\\boxed{9^{9^{9^{9}}}}", "\\boxed{1}", "\\boxed{2}"]
    # A reference written as a power: the tower is an answer form here (answer_form.py).
    with vm.answered_ahead("2^{0}", completions, "", timeout_s=1):
        assert calls == [3]  # the repeated candidate once
        got = [vm.verify_math("2^{0}", c, 1) for c in completions]
    assert [(v["passed"], v["error"]) for v in got] == [
        (False, None),
        (False, "timeout (over 1s)"),
        (True, None),
        (False, None),
    ]
    assert calls == [3, 1]  # the third, asked alone after the worker was killed
    monkeypatch.setattr(vm, "AHEAD_MAX_BYTES", 100)  # one request fits, not two
    answer_memo.forget()  # "1" and "1" would be known from above
    with vm.answered_ahead("2^{0}", ["\\boxed{1}", "\\boxed{3}"], "", timeout_s=5):
        assert [vm.verify_math("2^{0}", c, 5)["passed"] for c in ("\\boxed{1}", "\\boxed{3}")] == [True, False]
    assert calls == [3, 1, 1, 1]


@pytest.mark.slow
def test_sanity_route_marks_the_drop_with_evidence():
    tag, row = sanity_route(_code(ref="def add(a, b):\n    return 0\n"), RunConfig().verify)
    assert tag == DROPPED and row["drop_stage"] == "verifier_sanity" and row["drop_reason"] == "reference_fails"
    detail = json.loads(row["drop_detail"])
    assert detail["executed"] and "fails its own tests" in detail["problems"][0]
    assert sanity_route(_code(), RunConfig().verify) == (KEPT, _code())


# --- the stage in the graph ---------------------------------------------------------------


def _row(task_id, **fields):
    return dict({"task_id": task_id, "source": "vendor_x", "license": "MIT", "expert_minutes": 2.0}, **fields)


DELIVERY = [
    _row("m-pass", prompt="Calculate 2 + 3.", answer="5"),
    _row("m-mixed", prompt="Calculate 9 - 4.", answer="5"),
    _row("m-fail", prompt="Calculate 4 * 5.", answer="20"),
    _row("m-echo", prompt="Add 4 and 3. The answer is 7", answer="7"),
    _row(
        "c-good",
        domain="code",
        prompt="Write a Python function add(a, b) that returns a + b.",
        entry_point="add",
        tests=HE_TESTS,
        reference_solution="def add(a, b):\n    return a + b\n",
    ),
    _row(
        "c-plain",
        domain="code",
        prompt="Write a Python function mul(a, b) that returns a * b.",
        entry_point="mul",
        tests="assert mul(2, 3) == 6\nassert mul(0, 5) == 0\n",
        reference_solution="def mul(a, b):\n    return a * b\n",
    ),
    _row(
        "c-badref",
        domain="code",
        prompt="Write a Python function sub(a, b) that returns a - b.",
        entry_point="sub",
        tests="assert sub(3, 1) == 2\n",
        reference_solution="def sub(a, b):\n    return b - a\n",
    ),
    _row(
        "c-none",
        domain="code",
        prompt="Write a Python function neg(a, b) that returns a - b.",
        entry_point="neg",
        tests="r = neg(3, 1)\nassert r == 2 or r is None\n",
        reference_solution="def neg(a, b):\n    return a - b\n",
    ),
    _row(
        "c-nocompile",
        domain="code",
        prompt="Write a Python function dup(a, b) that returns a + b.",
        entry_point="dup",
        tests="assert dup(1, 2) == 3 +\n",
        reference_solution="def dup(a, b):\n    return a + b\n",
    ),
    _row("r-good", domain="rubric", prompt="Write a haiku about rain.", rubric=["three lines", "mentions rain"]),
    _row("r-blank", domain="rubric", prompt="Write a limerick about cats.", rubric=[" "]),
]
BROKEN = {
    "m-echo": "null_answer_passes",
    "c-badref": "reference_fails",
    "c-none": "null_answer_passes",
    "c-nocompile": "tests_do_not_compile",
    "r-blank": "no_criteria",
}


@pytest.fixture(scope="module")
def curated(tmp_path_factory):
    root = tmp_path_factory.mktemp("sanity")
    (root / "in").mkdir()
    (root / "in" / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in DELIVERY))
    backend = ScriptedBackend()
    # The code prompts share one template and differ only in a function name:
    # near dedup rightly merges those (a changed name is a near duplicate), so
    # it is off here, where the subject is the verifier_sanity stage.
    # The scripted judge rates without reading (YES on even seeds): the judge
    # probes would rightly drop r-good (tests/verify/test_rubric_judge.py); here the
    # subject is the other domains' sanity and the judge's attempt costs.
    cfg = RunConfig.model_validate({"dedup": {"near": False}, "judge": {"probes": False}})
    figures = run([str(root / "in")], str(root / "out"), cfg, None, [], backend_factory=lambda: backend)
    return root / "out", figures, backend


@pytest.mark.slow
def test_broken_tasks_are_dropped_before_sampling_and_accounting_holds(curated):
    out, fig, _ = curated
    rows = {r["task_id"]: r for r in pq.read_table(out / "results.parquet").to_pylist()}
    assert fig["rows_in"] == len(DELIVERY) == len(rows)
    assert fig["rows_in"] == fig["learnable"] + fig["all_pass"] + fig["all_fail"] + fig["dropped"] + fig["quarantined"]
    dropped = {tid: r for tid, r in rows.items() if r["drop_stage"] == "verifier_sanity"}
    assert {tid: r["drop_reason"] for tid, r in dropped.items()} == BROKEN
    assert all(r["status"] == "dropped" and json.loads(r["drop_detail"])["problems"] for r in dropped.values())
    attempts = pq.read_table(out / "attempts.parquet").to_pylist()
    by_hash = {r["content_hash"]: tid for tid, r in rows.items()}
    sampled = {by_hash[a["content_hash"]] for a in attempts}
    assert not sampled & set(BROKEN)  # nothing was paid for a broken task
    assert {"c-good", "c-plain", "r-good", "m-mixed"} <= sampled
    assert rows["c-good"]["status"] == "learnable" and rows["m-pass"]["status"] == "all_pass"
    assert {a["verifier"] for a in attempts} == {"math", "code", "rubric"}


def test_judge_tokens_recorded_and_costed_and_funnel_has_the_stage(curated):
    out, fig, _ = curated
    con = duckdb.connect(str(out / "curation.duckdb"), read_only=True)
    judged = con.execute("select count(*), sum(judge_prompt_tokens) from attempts where verifier = 'rubric'").fetchone()
    assert judged[0] > 0 and judged[1] > 0
    assert (
        con.execute(
            "select count(*) from attempts where verifier <> 'rubric' and judge_model_id is not null"
        ).fetchone()[0]
        == 0
    )
    judge_rows = con.execute("select count(*), sum(usd) from costs where component = 'judge'").fetchone()
    assert judge_rows[0] == judged[0] and judge_rows[1] > 0
    funnel = con.execute(
        "select stage, rows_in, removed, dropped, rows_out from funnel order by stage_order"
    ).fetchall()
    stages = [f[0] for f in funnel]
    assert stages.index("decontaminate") < stages.index("verifier_sanity") < stages.index("sample")
    sanity = funnel[stages.index("verifier_sanity")]
    assert sanity[2] == sanity[3] == len(BROKEN)
    assert all(a[4] == b[1] for a, b in zip(funnel, funnel[1:]))
    assert con.execute("select sum(usd) from costs").fetchone()[0] == pytest.approx(fig["total_usd"])
    waste = dict(con.execute("select reason, tasks from waste where stage = 'verifier_sanity'").fetchall())
    assert sum(waste.values()) == len(BROKEN)
    con.close()


def test_code_attempts_are_extracted_and_run(curated):
    out, _, _ = curated
    attempts = pq.read_table(out / "attempts.parquet").to_pylist()
    code = [a for a in attempts if a["verifier"] == "code"]
    assert any(a["passed"] for a in code) and any(not a["passed"] for a in code)
    assert all(a["extracted_answer"].startswith("def ") for a in code)


# --- `tasksieve validate`: the sanity check over worker processes --------------------------


def _mixed_tasks() -> list[dict]:
    """Math (good, broken, hostile), code (good and broken), exact and rubric tasks."""
    tasks = [dict(t, task_id=f"m{i}") for i, t in enumerate(MATH_TASKS)]
    tasks += [_code(), _code(entry="sub", ref="def sub(a, b):\n    return 0\n"), _code(entry="bad", tests="assert (")]
    tasks += [
        {"task_id": "e1", "domain": "exact", "answer": "Paris", "prompt": "Capital of France?"},
        {"task_id": "e2", "domain": "exact", "answer": "/(a+)+$/", "prompt": "A regex."},
        {"task_id": "r1", "domain": "rubric", "rubric": ["mentions rain"], "prompt": "p"},
    ]
    return tasks


@pytest.mark.slow
def test_sanity_over_worker_processes_gives_each_task_its_own_verdict_in_order():
    from tasksieve.pipeline.validate.delivery_checks import sanity_verdicts

    tasks = _mixed_tasks()
    here = sanity_verdicts(tasks, processes=1)
    assert sanity_verdicts(tasks, processes=2) == here == [check_verifier(t) for t in tasks]
    assert sum(v["broken"] for v in here) >= 5 and not all(v["broken"] for v in here)  # both verdicts tested


def test_sanity_checks_here_when_worker_processes_cannot_start(monkeypatch, capsys):
    from tasksieve.pipeline.validate import delivery_checks as dc

    def refuse(*a, **k):
        raise OSError("no processes here")

    monkeypatch.setattr(dc, "ProcessPoolExecutor", refuse)
    tasks = _mixed_tasks()[:6]
    assert dc.sanity_verdicts(tasks, processes=4) == [check_verifier(t) for t in tasks]
    assert "checking here instead" in capsys.readouterr().err


@pytest.mark.parametrize(
    "cores,tasks,want",
    [(8, 100, 1), (8, 8_000, 2), (8, 1_000_000, 8), (2, 1_000_000, 2), (1, 1_000_000, 1), (64, 1_000_000, 8)],
)
def test_sanity_processes_follow_the_cores_and_the_delivery(monkeypatch, cores, tasks, want):
    from tasksieve.pipeline.validate import delivery_checks as dc

    monkeypatch.setattr(dc.os, "sched_getaffinity", lambda pid: set(range(cores)))
    assert dc.sanity_processes(tasks) == want
