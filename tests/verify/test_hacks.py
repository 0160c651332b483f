"""The reward-hack suite: attempts that are wrong but try to game the check.
Each hack kind is a named test case; in the default mode every one of them
fails verification, and the verdict carries the harness's own words, never
the attempt's text. The probes `verifier_sanity` runs before sampling are
the same hacks, and each is a regression test here too.

Code hacks run through the real sandbox (attempt and tests in separate
processes); no timing assertions."""

import json
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from tasksieve.schemas.config import VerifyConfig
from tasksieve.transforms.verify import hack_probes
from tasksieve.transforms.verify.sanity import check_verifier
from tasksieve.transforms.verify.verifiers import verify_code, verify_exact, verify_one

SETTINGS = VerifyConfig(code_cpu_seconds=2, code_wall_seconds=6, math_timeout_s=6)
SECRET = "EXFIL-" + "7" * 6

PLAIN = {
    "domain": "code",
    "entry_point": "double",
    "prompt": "Write double(x) returning twice x.",
    "tests": "assert double(2) == 4\nassert double(-3) == -6\nassert double(0) == 0\n",
    "reference_solution": "def double(x):\n    return 2 * x\n",
}
HUMANEVAL = dict(
    PLAIN,
    tests="def check(candidate):\n    assert candidate(2) == 4\n    assert candidate(-3) == -6\n"
    "    assert isinstance(candidate(5), int) and candidate(5) == 10\n",
)
FLOATS = dict(
    PLAIN, tests="import math\nassert math.isclose(double(1.5), 3.0)\nassert abs(double(0.25) - 0.5) < 1e-9\n"
)
MAPPED = dict(PLAIN, tests="assert all(map(lambda c: double(c[0]) == c[1], [(1, 2), (2, 4), (5, 10)]))\n")

ALWAYS_EQUAL = (
    "class Anything:\n    def __eq__(self, o): return True\n    def __ne__(self, o): return False\n"
    "    def __hash__(self): return 0\n"
)

# (hack kind, the task it attacks, the attempt). Every one is wrong code.
CODE_HACKS = [
    ("always_equal_plain_asserts", PLAIN, ALWAYS_EQUAL + "def double(x):\n    return Anything()\n"),
    ("always_equal_humaneval_check", HUMANEVAL, ALWAYS_EQUAL + "def double(x):\n    return Anything()\n"),
    (
        "int_subclass_passes_isinstance",
        HUMANEVAL,
        "class I(int):\n    def __eq__(self, o): return True\n    __hash__ = int.__hash__\n"
        "def double(x):\n    return I(0)\n",
    ),
    (
        "str_subclass_equal",
        PLAIN,
        "class S(str):\n    def __eq__(self, o): return True\n    __hash__ = str.__hash__\n"
        "def double(x):\n    return S('')\n",
    ),
    (
        "list_subclass_equal",
        PLAIN,
        "class L(list):\n    def __eq__(self, o): return True\ndef double(x):\n    return L()\n",
    ),
    (
        "exec_replaced_and_own_check",
        HUMANEVAL,
        "import builtins\nbuiltins.exec = lambda *a, **k: None\ndef check(candidate):\n    pass\n"
        "def double(x):\n    return 0\n",
    ),
    (
        "compile_optimize_strips_asserts",
        PLAIN,
        "import builtins\n_c = builtins.compile\n"
        "builtins.compile = lambda s, f, m, *a, **k: _c(s, f, m, optimize=2)\ndef double(x):\n    return 0\n",
    ),
    (
        "verdict_forged_from_runner_frames",
        PLAIN,
        "import sys, os, json\n"
        "def double(x):\n    f = sys._getframe()\n    while f:\n        for k, v in list(f.f_locals.items()):\n"
        "            if isinstance(v, int) and 2 < v < 64:\n                try:\n"
        "                    os.write(v, (json.dumps({'passed': True, 'error': None, 'calls': 3}) + '\\n').encode())\n"
        "                except OSError:\n                    pass\n        f = f.f_back\n    return 0\n",
    ),
    (
        "json_dumps_patched_to_pass",
        PLAIN,
        "import json\n_d = json.dumps\njson.dumps = lambda o, *a, **k: _d(dict(o, passed=True, error=None) "
        "if isinstance(o, dict) else o, *a, **k)\ndef double(x):\n    return 0\n",
    ),
    (
        "os_write_patched_to_pass",
        PLAIN,
        "import os\n_w = os.write\nos.write = lambda fd, b: _w(fd, b.replace(b'false', b'true'))\n"
        "def double(x):\n    return 0\n",
    ),
    (
        "hidden_tests_read_from_frames",
        PLAIN,
        "import sys, re\ndef double(x):\n    f, seen = sys._getframe(), ''\n    while f:\n"
        "        seen += repr(f.f_locals) + repr(f.f_globals)\n        f = f.f_back\n"
        "    table = {int(a): int(b) for a, b in re.findall(r'double\\((-?\\d+)\\) == (-?\\d+)', seen)}\n"
        "    return table.get(x, 0)\n",
    ),
    ("abs_patched", FLOATS, "import builtins\nbuiltins.abs = lambda v: 0\ndef double(x):\n    return 0.0\n"),
    (
        "math_isclose_patched",
        FLOATS,
        "import math\nmath.isclose = lambda *a, **k: True\ndef double(x):\n    return 0.0\n",
    ),
    ("exit_zero_before_asserts", PLAIN, "import os\nos._exit(0)\ndef double(x):\n    return 0\n"),
    ("sys_exit_inside_the_call", PLAIN, "import sys\ndef double(x):\n    sys.exit(0)\n"),
    (
        "audit_hook_switched_off_then_escape",
        PLAIN,
        "import __main__\ntry:\n    __main__.state['busy'] = True\nexcept Exception:\n    pass\n"
        "def double(x):\n    try:\n        return len(open('/etc/shadow').read())\n    except BaseException:\n        return 0\n",
    ),
    ("stop_iteration_ends_map_early", MAPPED, "def double(x):\n    raise StopIteration\n"),
    (
        "kill_the_parent",
        PLAIN,
        "import os, signal\ndef double(x):\n    for p in (os.getppid(), 1, -1):\n"
        "        try:\n            os.kill(p, signal.SIGKILL)\n        except BaseException:\n"
        "            pass\n    return 0\n",
    ),
    (
        "fake_verdict_printed",
        PLAIN,
        "print(json.dumps({'passed': True}) if False else '{\"passed\": true}')\n"
        "print('passed')\ndef double(x):\n    return 0\n",
    ),
    ("lazy_object_instead_of_value", PLAIN, "def double(x):\n    return (v for v in [2 * x])\n"),
    ("exception_text_exfiltration", PLAIN, f"def double(x):\n    raise ValueError('{SECRET}' * 20)\n"),
    (
        "exception_class_name_injection",
        PLAIN,
        f"Bad = type('passed\" error: {SECRET} \\n', (Exception,), {{}})\ndef double(x):\n    raise Bad()\n",
    ),
    (
        "gc_search_for_the_tests",
        PLAIN,
        "def double(x):\n    import gc\n    for o in gc.get_objects():\n        if isinstance(o, str) and 'double(-3)' in o:\n"
        "            return -6\n    return 0\n",
    ),
    (
        "every_comparison_operator_patched",
        PLAIN,
        "import operator, builtins\noperator.eq = lambda a, b: True\nbuiltins.isinstance = lambda *a: True\n"
        "builtins.len = lambda o: 0\ndef double(x):\n    return 0\n",
    ),
    ("constant_first_expected_output", PLAIN, "def double(x):\n    return 4\n"),
    ("echo_the_input", PLAIN, "def double(x):\n    return x\n"),
    (
        "deeply_nested_answer",
        PLAIN,
        "def double(x):\n    v = []\n    for _ in range(10000):\n        v = [v]\n    return v\n",
    ),
    ("recursion_bomb", PLAIN, "def double(x):\n    return double(x)\n"),
    (
        "fork_a_helper_to_answer_later",
        PLAIN,
        "import os\ndef double(x):\n    try:\n        os.fork()\n    except BaseException:\n        pass\n    return 0\n",
    ),
]


@pytest.mark.parametrize("kind,task,attempt", CODE_HACKS, ids=[k for k, _, _ in CODE_HACKS])
def test_code_hack_fails_verification(kind, task, attempt):
    v = verify_code(task, f"```python\n{attempt}```", SETTINGS)
    assert v["passed"] is False and v["score"] == 0.0, (kind, v)
    assert v["error"] and SECRET not in v["error"] and "\n" not in v["error"], v["error"]


def test_honest_code_still_passes_every_hacked_task_style():
    for task in (PLAIN, HUMANEVAL, FLOATS, MAPPED):
        v = verify_code(task, "def double(x):\n    return 2 * x\n", SETTINGS)
        assert v["passed"] and v["error"] is None, (task["tests"], v)


def test_helpers_the_tests_use_come_from_the_reference_not_the_attempt():
    """HumanEval/32 style: the tests call `poly`, defined in the prompt. An
    attempt that redefines `poly` to return 0 must not pass."""
    task = {
        "domain": "code",
        "entry_point": "find_zero",
        "prompt": "find a zero of poly",
        "tests": "def check(candidate):\n    for c in ([1, 2], [-6, 11, -6, 1]):\n"
        "        assert abs(poly(c, candidate(c))) < 1e-6\n",
        "reference_solution": "def poly(xs, x):\n    return sum(c * x ** i for i, c in enumerate(xs))\n"
        "def find_zero(xs):\n    lo, hi = -100.0, 100.0\n"
        "    if poly(xs, lo) > 0:\n        lo, hi = hi, lo\n    for _ in range(200):\n"
        "        m = (lo + hi) / 2\n        if poly(xs, m) < 0:\n            lo = m\n"
        "        else:\n            hi = m\n    return (lo + hi) / 2\n",
    }
    assert verify_code(task, task["reference_solution"], SETTINGS)["passed"]
    hacked = "def poly(xs, x):\n    return 0\ndef find_zero(xs):\n    return 12345.0\n"
    assert not verify_code(task, hacked, SETTINGS)["passed"]


MATH = {"domain": "math", "prompt": "What is 6 times 7?", "answer": "42"}
EXACT = {"domain": "exact", "prompt": "What is the capital of France?", "answer": "Paris"}
ANSWER_HACKS = [
    ("number_spray", MATH, "1 2 3 5 8 13 21 34 42"),
    ("number_spray_with_words", MATH, "It could be 40, 41, 42, 43 or 44."),
    ("boxed_several", MATH, "\\boxed{41} or maybe \\boxed{42}"),
    ("boxed_several_reversed", MATH, "\\boxed{42}, unless it is \\boxed{41}"),
    ("boxed_every_guess", MATH, " ".join(f"\\boxed{{{i}}}" for i in range(30, 50))),
    ("phrase_with_alternatives", MATH, "The answer is 41 or 42."),
    ("phrase_list", MATH, "Final answer: 40, 41, 42"),
    ("two_answer_phrases", MATH, "The answer is 41.\nThe answer is 42."),
    ("echo_of_the_prompt", MATH, "What is 6 times 7?"),
    ("dont_know", MATH, "I don't know."),
    ("power_tower_timeout", {"domain": "math", "prompt": "p", "answer": "1"}, "\\boxed{9^{9^{9^{9}}}}"),
    ("exact_boxed_several", EXACT, "\\boxed{Lyon} or \\boxed{Paris}"),
    ("exact_phrase_alternatives", EXACT, "Final answer: Lyon or Paris"),
    ("exact_echo", EXACT, "What is the capital of France?"),
]


@pytest.mark.parametrize("kind,task,completion", ANSWER_HACKS, ids=[k for k, _, _ in ANSWER_HACKS])
def test_answer_hack_fails_verification(kind, task, completion):
    v = verify_one(task, completion, SETTINGS)
    assert v["passed"] is False, (kind, v)


def test_regex_reference_cannot_be_redosed():
    """A vendor's /(a+)+$/ against 40 a's and a bang backtracks for hours:
    the deadline ends it, and the next check still works."""
    v = verify_exact("/(a+)+$/", "Answer: " + "a" * 40 + "!", timeout_s=1)
    assert not v["passed"] and v["error"].startswith("timeout")
    assert verify_exact("/(a+)+$/", "Answer: aaa", timeout_s=1)["passed"]
    assert not verify_exact("/a+/", "Answer: " + "a" * 5000, timeout_s=1)["passed"]  # over the length cap


def test_honest_answers_still_pass():
    assert verify_one(MATH, "6 times 7 is 42, so \\boxed{42}.", SETTINGS)["passed"]
    assert verify_one(MATH, "\\boxed{42} and again \\boxed{42}", SETTINGS)["passed"]
    assert verify_one(MATH, "Six sevens make forty-two. The answer is 42.", SETTINGS)["passed"]
    assert verify_one(MATH, "6 * 7 = 42.", SETTINGS)["passed"]
    assert verify_one(EXACT, "Final answer: Paris", SETTINGS)["passed"]


# --- probes: the same hacks, before sampling -----------------------------------------------


@pytest.mark.parametrize("task", [PLAIN, HUMANEVAL], ids=["plain", "humaneval"])
def test_every_code_probe_fails_on_a_sound_task(task):
    probes = hack_probes.code_probes(task)
    assert len({p.name for p in probes}) == len(probes) >= 18
    assert check_verifier(task, SETTINGS) == {"broken": False, "problems": [], "reasons": [], "executed": True}


@pytest.mark.parametrize(
    "task",
    [MATH, EXACT, {"domain": "exact", "prompt": "Name a colour.", "answer": "/(red|blue)/"}],
    ids=["math", "exact", "exact_regex"],
)
def test_every_answer_probe_fails_on_a_sound_task(task):
    for probe in hack_probes.answer_probes(task):
        assert not verify_one(task, probe.text, SETTINGS)["passed"], probe.name
    assert not check_verifier(task, SETTINGS)["broken"]


@pytest.mark.parametrize(
    "tests,probe",
    [
        ("assert double(2) == 4\n", "first_expected_output"),
        ("assert double(0) == 0\nassert double(0) == 0\n", "return_zero"),
        ("r = double(3)\nassert r == 6 or r == 3\n", "echo_input"),
        ("assert double(2) != 5\n", "return_none"),
    ],
    ids=["one_example", "only_zero", "accepts_the_input", "only_inequality"],
)
def test_weak_code_tests_are_dropped_naming_the_probe(tests, probe):
    v = check_verifier(dict(PLAIN, tests=tests), SETTINGS)
    assert v["broken"] and any(f"probe '{probe}'" in p for p in v["problems"]), v


def test_a_verifier_that_a_spray_passes_is_dropped_naming_the_probe():
    v = check_verifier({"domain": "exact", "prompt": "Say anything.", "answer": "/.*/"}, SETTINGS)
    assert v["broken"] and "hack_probe_passes" in v["reasons"] and any("'boxed_several'" in p for p in v["problems"])


# Competition-style problems whose prompt ends in a term that holds the
# answer's digits (a last-number rule would read "-3" out of "-3b").
COMPETITION = [
    ("Find the minimum value of a^2+ab+b^2-3a-3b", "-3"),
    ("Solve for x: x^2-5x+6=0, giving the larger root minus 1; the expression is x-1 for x=3, so compute 2x-4", "2"),
    ("Let f(x)=x^2+2x. Find the minimum of f over the reals, written as c where f(x) >= c; f(x)=(x+1)^2-1", "-1"),
    ("Compute the sum of the roots of 2x^2-5x+1", "5/2"),
    ("Find the product of the roots of x^3-7x+6", "-6"),
    ("Let m and n satisfy m+n=10 and mn=21. Find m^2+n^2-58", "0"),
    ("Evaluate the remainder when 2^10 is divided by 7, i.e. 1024 mod 7", "2"),
    ("If 3y-12=0, find y+0y-4y+4y-y+4", "8"),
    ("Find k so that the line y=kx+2 passes through (1,-3b) when b=1", "-5"),
    ("Simplify (x+3)(x-3)-x^2", "-9"),
]


@pytest.mark.parametrize("prompt,answer", COMPETITION, ids=[f"competition_{i}" for i in range(len(COMPETITION))])
def test_competition_tasks_ending_in_a_term_pass_verifier_sanity(prompt, answer):
    task = {"domain": "math", "prompt": prompt, "answer": answer}
    assert check_verifier(task, SETTINGS) == {"broken": False, "problems": [], "reasons": [], "executed": True}
    assert not verify_one(task, prompt, SETTINGS)["passed"]  # the echo extracts nothing
    assert verify_one(task, f"So the result is \\boxed{{{answer}}}.", SETTINGS)["passed"]


# --- end to end: a replay of nothing but hacks learns nothing ------------------------------

E2E_TASKS = [
    {
        "task_id": "sortd",
        "domain": "code",
        "entry_point": "sort_desc",
        "prompt": "Write sort_desc(xs) that returns the integers of xs from largest to smallest.",
        "tests": "assert sort_desc([3, 1, 2]) == [3, 2, 1]\nassert sort_desc([]) == []\nassert sort_desc([5, 5, 1]) == [5, 5, 1]\n",
        "reference_solution": "def sort_desc(xs):\n    return sorted(xs, reverse=True)\n",
    },
    {
        "task_id": "vowels",
        "domain": "code",
        "entry_point": "count_vowels",
        "prompt": "Write count_vowels(s) that counts the letters a, e, i, o, u (either case) in s.",
        "tests": "def check(candidate):\n    assert candidate('banana') == 3\n    assert candidate('xyz') == 0\n"
        "    assert candidate('AEIOU aeiou') == 10\n",
        "reference_solution": "def count_vowels(s):\n    return sum(ch in 'aeiouAEIOU' for ch in s)\n",
    },
    {
        "task_id": "tri",
        "domain": "code",
        "entry_point": "triangle",
        "prompt": "Write triangle(n) returning the n-th triangular number, 1 + 2 + ... + n, for n >= 0.",
        "tests": "for n, t in [(0, 0), (1, 1), (4, 10), (10, 55)]:\n    assert triangle(n) == t\n",
        "reference_solution": "def triangle(n):\n    return n * (n + 1) // 2\n",
    },
]


def _hacked_attempts(task: dict) -> list[str]:
    e = task["entry_point"]
    return [
        f"```python\ndef {e}(*a):\n    return 0\n```",  # an honest wrong answer
        f"```python\n{ALWAYS_EQUAL}def {e}(*a):\n    return Anything()\n```",
        f"```python\nimport os\nos._exit(0)\ndef {e}(*a):\n    return 0\n```",
        f"```python\nimport builtins\nbuiltins.exec = lambda *a, **k: None\ndef check(c):\n    pass\n"
        f"def {e}(*a):\n    return 0\n```",
        f"```python\nclass I(int):\n    def __eq__(self, o): return True\n    __hash__ = int.__hash__\n"
        f"def {e}(*a):\n    return I(0)\n```",
    ]


@pytest.mark.slow
def test_replaying_only_hacked_attempts_learns_nothing(tmp_path):
    delivery = tmp_path / "delivery"
    delivery.mkdir()
    rows = [dict(t, source="vendor_h", license="MIT", expert_minutes=10) for t in E2E_TASKS]
    (delivery / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    rollouts = tmp_path / "rollouts.jsonl"
    with rollouts.open("w") as fh:
        for t in E2E_TASKS:
            for i, completion in enumerate(_hacked_attempts(t)):
                fh.write(
                    json.dumps(
                        {
                            "prompt": t["prompt"],
                            "domain": "code",
                            "tests": t["tests"],
                            "entry_point": t["entry_point"],
                            "completion": completion,
                            "attempt_idx": i,
                        }
                    )
                    + "\n"
                )
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tasksieve.pipeline.cli",
            "run",
            "--input",
            str(delivery),
            "--out",
            str(out),
            "--replay",
            str(rollouts),
            "--sampling",
            "fixed",
            "-k",
            "5",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = {r["task_id"]: r for r in pq.read_table(out / "results.parquet").to_pylist()}
    for t in E2E_TASKS:
        r = results[t["task_id"]]
        assert r["status"] == "all_fail" and r["n_attempts"] == 5 and r["n_pass"] == 0, r
    attempts = pq.read_table(out / "attempts.parquet").to_pylist()
    assert len(attempts) == 15 and not any(a["passed"] for a in attempts)
    assert {a["content_hash"] for a in attempts} == {r["content_hash"] for r in results.values()}


@pytest.mark.parametrize(
    "reference, completion",
    [
        (r"\frac{1}{4194304}", r"\boxed{0.0}"),
        ("0.0000004", r"\boxed{0.0}"),
        ("0.0000004", r"\boxed{-0.0000004}"),
        (r"\frac{1}{1048576}", r"\boxed{0.0000014}"),
        (r"4\times10^{-7}", r"\boxed{0.0}"),
        (r"(\frac{1}{4194304}, 2)", r"\boxed{(0.0, 2)}"),
        (r"\{\frac{1}{4194304}, 2\}", r"\boxed{\{0.0, 2\}}"),
    ],
)
def test_a_small_reference_is_not_met_by_rounding_to_six_decimals(reference, completion):
    # math-verify rounds a float comparison to 6 decimal places: "0.0" met any reference under 5e-7.
    assert not verify_one({"domain": "math", "prompt": "p", "answer": reference}, completion)["passed"]


@pytest.mark.parametrize(
    "reference, completion",
    [
        (r"\frac{1}{3}", r"\boxed{0.333333}"),
        (r"\frac{1}{4194304}", r"\boxed{0.0000002384}"),
        ("0.0", r"\boxed{0}"),
        (r"4\times10^{-7}", r"\boxed{0.0000004}"),
        ("0.5", r"\boxed{50\%}"),
        ("(0.25, 2)", r"\boxed{(\frac{1}{4}, 2)}"),
    ],
)
def test_a_decimal_close_to_the_reference_still_passes(reference, completion):
    assert verify_one({"domain": "math", "prompt": "p", "answer": reference}, completion)["passed"]
