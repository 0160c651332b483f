"""Every verifier on passing, failing and hostile attempts; the batched
`verify_attempts` (code in parallel, one judge call per wave); judge cost."""

import pytest

from fakes import ScriptedBackend
from tasksieve.schemas.config import VerifyConfig
from tasksieve.schemas.rates import Rates
from tasksieve.transforms.backends.base import GenResult
from tasksieve.transforms.costs import attempt_cost_rows
from tasksieve.transforms.verify.verifiers import (
    extract_code,
    parse_judgement,
    verify_attempts,
    verify_code,
    verify_exact,
    verify_one,
)

FAST = VerifyConfig(code_cpu_seconds=2, code_wall_seconds=3, code_memory_mb=256, math_timeout_s=2)

HUMANEVAL = {
    "domain": "code",
    "entry_point": "add",
    "prompt": "Write add(a, b).",
    "content_hash": "he",
    "tests": "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(-1, 1) == 0\n",
}
PLAIN = dict(HUMANEVAL, tests="assert add(1, 2) == 3\nassert add(0, 0) == 0\n", content_hash="pl")
RUBRIC = {
    "domain": "rubric",
    "prompt": "Write a haiku about rain.",
    "content_hash": "rb",
    "rubric": ["is three lines", "mentions rain", "5-7-5 syllables"],
}


@pytest.mark.parametrize(
    "completion,expected",
    [
        ("Sure:\n```python\ndef add(a, b):\n    return a + b\n```\nThis adds.", "def add(a, b):\n    return a + b"),
        (
            "```py\nimport math\n```\ntext\n```python\ndef add(a, b):\n    return a + b\n```",
            "def add(a, b):\n    return a + b",
        ),
        ("```python\ndef add(a, b):\n    return a + b\n", "def add(a, b):\n    return a + b"),  # unclosed fence
        ("def add(a, b):\n    return a + b\n\nThis function returns the sum.", "def add(a, b):\n    return a + b\n"),
        ("The function is: def add(a, b): return a + b", "def add(a, b): return a + b"),
        ("I cannot write that.", ""),
    ],
)
def test_code_extraction(completion, expected):
    assert extract_code(completion, "add").strip() == expected.strip()


@pytest.mark.parametrize("task", [HUMANEVAL, PLAIN], ids=["humaneval", "plain_asserts"])
def test_code_verifier_pass_fail_and_syntax(task):
    ok = verify_code(task, "```python\ndef add(a, b):\n    return a + b\n```", FAST)
    assert ok["passed"] and ok["score"] == 1.0 and ok["error"] is None and ok["verifier"] == "code"
    assert ok["extracted_answer"].startswith("def add") and ok["verify_seconds"] > 0
    bad = verify_code(task, "```python\ndef add(a, b):\n    return a - b\n```", FAST)
    assert not bad["passed"] and bad["error"].startswith("wrong_answer (tests line ")
    syn = verify_code(task, "```python\ndef add(a, b)\n    return a + b\n```", FAST)
    assert not syn["passed"] and syn["error"] == "syntax_error (line 1)"
    none = verify_code(task, "I don't know.", FAST)
    assert not none["passed"] and none["error"] == "no_code"


@pytest.mark.parametrize(
    "body,reason",
    [
        ("import socket\n    socket.create_connection(('8.8.8.8', 53))", "blocked: network"),
        ("open('/etc/passwd', 'a').write('x')", "blocked: write"),
        ("while True: pass", "timeout"),
        ("import os\n    return os.environ['HOME']", "KeyError"),
    ],
)
def test_code_verifier_contains_hostile_attempts(body, reason):
    v = verify_code(PLAIN, f"```python\ndef add(a, b):\n    {body}\n    return a + b\n```", FAST)
    assert not v["passed"] and reason in v["error"]


@pytest.mark.slow
def test_math_and_exact_verifiers_pass_fail_and_hostile():
    task = {"domain": "math", "answer": "8"}
    assert verify_one(task, "so 5 + 3 = 8", FAST)["passed"]
    assert not verify_one(task, "so 5 + 3 = 9", FAST)["passed"]
    # A 21-character power tower keeps sympy busy for minutes: the deadline kills the worker.
    # (The reference is written as a power so that a power is an answer form here: with a
    # plain reference the tower is refused unparsed, answer_form.py.)
    tower = verify_one({"domain": "math", "answer": "2^{0}"}, "\\boxed{9^{9^{9^{9}}}}", FAST)
    assert not tower["passed"] and tower["error"].startswith("timeout")
    assert verify_one(task, "\\boxed{8}", FAST)["passed"]  # a fresh worker took over
    assert verify_exact("Paris", "Final answer: paris")["passed"]
    assert not verify_exact("Paris", "Final answer: Lyon")["passed"]
    assert verify_exact("/(a|b)+/", "Answer: " + "a" * 50)["passed"]
    hostile = verify_exact("[", "Answer: x")
    assert not hostile["passed"]


def test_judge_reply_parsing():
    assert parse_judgement("1: YES\n2: no\n3: Yes", 3) == ([True, False, True], None)
    assert parse_judgement("**Criterion 1**: YES\n2. No, it does not.", 3)[0] == [True, False, False]
    assert "did not rate criteria 3" in parse_judgement("1: YES\n2: NO", 3)[1]
    assert parse_judgement("The response is great!", 3)[0] is None


class _Judge:
    model_id = "judge-model@1"

    def __init__(self, replies):
        self.replies, self.calls, self.seen = replies, 0, []

    def generate(self, requests):
        self.calls += 1
        self.seen.extend(requests)
        return [GenResult(self.replies[i % len(self.replies)], 100 + i, 10, "stop", 0.5) for i in range(len(requests))]


def test_verify_attempts_runs_a_wave_with_one_judge_call():
    judge = _Judge(["1: YES\n2: YES\n3: NO", "1: NO\n2: NO\n3: NO", "I refuse to grade."])
    code_ok = "```python\ndef add(a, b):\n    return a + b\n```"
    items = [
        (RUBRIC, "Rain falls..."),
        (PLAIN, code_ok),
        (HUMANEVAL, code_ok.replace("+", "*")),
        (RUBRIC, "Sunshine."),
        ({"domain": "math", "answer": "8", "content_hash": "m"}, "= 8"),
        (RUBRIC, "x"),
    ]
    v = verify_attempts(items, judge, FAST, seeds=[1, 2, 3, 4, 5, 6])
    assert judge.calls == 1 and len(judge.seen) == 3  # every rubric attempt of the wave, one call
    assert "Criteria:\n1. is three lines" in dict(judge.seen[0].messages)["user"]
    assert [x["verifier"] for x in v] == ["rubric", "code", "code", "rubric", "math", "rubric"]
    assert [x["passed"] for x in v] == [False, True, False, False, True, False]
    assert v[0]["score"] == pytest.approx(2 / 3) and v[3]["score"] == 0.0  # threshold 0.7
    assert v[5]["error"].startswith("judge reply has no ratings")
    assert v[0]["judge_model_id"] == "judge-model@1" and v[0]["judge_prompt_tokens"] == 100
    assert v[1]["judge_model_id"] is None and v[1]["judge_prompt_tokens"] is None
    lenient = verify_attempts(items[:1], judge, FAST.model_copy(update={"rubric_pass_threshold": 0.6}))
    assert lenient[0]["passed"]


def test_a_failing_judge_marks_rubric_attempts_only():
    class Broken:
        model_id = "j@1"

        def generate(self, requests):
            raise RuntimeError("server down")

    v = verify_attempts([(RUBRIC, "x"), ({"domain": "exact", "answer": "7"}, "Final answer: 7")], Broken(), FAST)
    assert v[0]["error"] == "judge failed: RuntimeError: server down" and not v[0]["passed"]
    assert v[1]["passed"] and v[1]["error"] is None
    assert verify_attempts([(RUBRIC, "x")], None, FAST)[0]["error"] == "no judge backend configured"


def test_scripted_backend_as_judge():
    v = verify_attempts([(RUBRIC, "Rain, rain.")] * 4, ScriptedBackend(), FAST, seeds=[0, 1, 2, 3])
    assert {x["score"] for x in v} <= {0.0, 1.0} and all(x["error"] is None for x in v)


def test_judge_tokens_are_costed_at_the_judge_models_rate():
    rates = Rates.model_validate(
        {
            "expert": {"usd_per_hour": 60},
            "generation": [
                {"model": "policy", "unit": "tokens", "usd_per_m_input": 1.0, "usd_per_m_output": 2.0},
                {"model": "judge-model", "unit": "tokens", "usd_per_m_input": 10.0, "usd_per_m_output": 20.0},
            ],
            "verification": {"usd_per_cpu_hour": 3.6},
        }
    )
    a = {
        "content_hash": "h",
        "attempt_idx": 0,
        "model_id": "policy@1",
        "prompt_tokens": 1000,
        "completion_tokens": 1000,
        "gen_seconds": 1.0,
        "verify_seconds": 1.0,
        "judge_model_id": "judge-model@1",
        "judge_prompt_tokens": 100_000,
        "judge_completion_tokens": 50_000,
        "judge_seconds": 2.0,
    }
    rows = {r["component"]: r for r in attempt_cost_rows(a, ("v", "t"), rates, "r")}
    assert rows["judge"]["usd"] == pytest.approx(100_000 / 1e6 * 10 + 50_000 / 1e6 * 20)
    assert rows["judge"]["quantity"] == 150_000 and rows["judge"]["unit"] == "token"
    assert rows["generation"]["usd"] == pytest.approx(0.003)
    no_judge = dict(a, judge_model_id=None)
    assert "judge" not in {r["component"] for r in attempt_cost_rows(no_judge, ("v", "t"), rates, "r")}


def test_extracting_code_compiles_a_bounded_amount_of_a_hostile_completion(monkeypatch):
    # No fence, never compiles, 200 prose-like lines at the end: each cut used to compile ~100k characters.
    from tasksieve.transforms.verify import verifiers

    compiled = []
    real = verifiers.compile_error
    monkeypatch.setattr(verifiers, "compile_error", lambda src, label: compiled.append(len(src)) or real(src, label))
    body = "def f(x):\n" + "    y = ((((x))))\n" * 5000
    text = (body + "\n".join(["z = (1 + )"] * 201))[: verifiers.MAX_CODE_CHARS - 10]
    verifiers.extract_code(text, "f")
    assert sum(compiled) <= verifiers.EXTRACT_COMPILE_BUDGET + verifiers.MAX_CODE_CHARS


def test_extracting_code_still_cuts_prose_after_the_code():
    from tasksieve.transforms.verify.verifiers import extract_code

    assert extract_code("def f(x):\n    return x\nThis returns x.\nHope it helps!", "f") == "def f(x):\n    return x"
