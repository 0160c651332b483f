import random

import pyarrow as pa
import pytest

from tasksieve.schemas.config import ConfigError, load_config
from tasksieve.schemas.rates import Rates, load_rates
from tasksieve.schemas.records import COST_SCHEMA, RESULT_SCHEMA
from tasksieve.transforms.costs import attempt_cost_rows, expert_cost_row, expert_cost_table
from tasksieve.transforms.verify.verifiers import verify_exact, verifier_for
from tasksieve.transforms.verify.math_answers import extract_final_answer, verify_math


@pytest.mark.parametrize(
    "completion,expected,rule",
    [
        ("so we get \\boxed{\\frac{1}{2}} done", "\\frac{1}{2}", "boxed"),
        ("\\boxed{4} first, then \\boxed{4} again", "4", "boxed"),
        ("\\boxed{3} first, then \\boxed{4}", None, "several"),  # two distinct final answers
        ("Adding them, the final answer is 12.", "12", "phrase"),
        ("Answer: 1,234", "1,234", "phrase"),
        ("The answer is 3 or 4.", None, "several"),
        ("5 + 3 = 8. So there are 8 apples.", "8", "last_number"),
        ("4 + 4 = 8, the result of adding 4 to itself once.", "8", "last_number"),
        ("6 and 8 together, which equals 14, for 2 kids", "14", "last_number"),
        ("2 + 6 = 8. So the answer is straightforward.", "8", "last_number"),
        ("There are 3 cats and 5 dogs, so 8 pets.", None, "none"),  # three numbers: which one is the answer?
        ("1 2 3 5 8 13 21 34 42", None, "none"),
        ("I cannot tell.", None, "none"),
        ("", None, "empty"),
    ],
)
def test_answer_extraction_rules(completion, expected, rule):
    assert extract_final_answer(completion) == (expected, rule)


@pytest.mark.parametrize(
    "prompt,completion,expected",
    [
        ("Add 5 and 0.", "So it is 5.", None),  # the prompt states 5: an echo could win it
        ("Add 5 and 1.", "So it is 6.", "6"),
        ("Minimise a^2+ab+b^2-3a-3b.", "Minimise a^2+ab+b^2-3a-3b.", None),
    ],
)
def test_last_number_rule_ignores_numbers_the_prompt_states(prompt, completion, expected):
    assert extract_final_answer(completion, prompt=prompt)[0] == expected


def _last_number_plainly(completion: str, prompt: str):
    """Rule 3 read plainly: every sentence, every number of the last one
    holding any, every equation result, every number of the prompt."""
    import re

    number = r"-?\d[\d,]*(?:\.\d+)?(?:/\d+)?"
    sentences = [x for x in re.split(r"(?<=[.!?])\s+|\n+", completion) if x and re.search(number, x)]
    if not sentences:
        return None
    numbers = re.findall(number, sentences[-1])
    results = re.findall(r"(?:=|\bequals?\b|\bis equal to\b)\s*\$?\s*(" + number + ")", sentences[-1])
    found = numbers[0] if len(numbers) == 1 else results[0] if len(results) == 1 else None

    def key(n):
        n = n.replace(",", "")
        try:
            return repr(float(n)) if "/" not in n else n
        except ValueError:
            return n

    if found is None or key(found) in {key(n) for n in re.findall(number, prompt)}:
        return None
    return found.replace(",", "")


def test_last_number_rule_reads_at_most_what_it_needs_and_decides_the_same():
    """The rule stops at the second number of the last sentence (a model
    output listing thousands costs what two do) and caches each prompt's
    numbers: neither may change an answer."""
    from tasksieve.transforms.verify.math_answers import _last_number_answer

    rng = random.Random(7)
    tokens = [
        "5",
        "-3",
        "1,234",
        "2/3",
        "0.5",
        "12",
        "=",
        "equals",
        "is equal to",
        "$",
        "x",
        "so",
        "cats",
        ".",
        "!",
        "?",
        "\n",
        ",",
        "and",
        "7.",
        "8!",
        "1,000,000",
        "3/4.",
    ]
    prompts = ["", "Add 5 and 12.", "What is 2/3 of 1,234?", "Compute 0.5 + 7.", "No numbers here."]
    cases = 0
    for _ in range(4000):
        completion = " ".join(rng.choice(tokens) for _ in range(rng.randint(0, 14)))
        prompt = rng.choice(prompts)
        assert _last_number_answer(completion, prompt) == _last_number_plainly(completion, prompt), (completion, prompt)
        cases += _last_number_plainly(completion, prompt) is not None
    assert cases > 400  # the rule answered often enough for the comparison to mean something
    many = " ".join(str(i) for i in range(-10, 50_000)) + "."
    assert _last_number_answer(many, "") is None and _last_number_plainly(many, "") is None
    assert _last_number_answer(many + " So it is 60000.", "") == "60000"


@pytest.mark.parametrize(
    "reference,completion,ok",
    [
        ("8", "5 + 3 = 8", True),
        ("8", "The answer is \\boxed{8}", True),
        ("0.5", "\\boxed{\\frac{1}{2}}", True),
        ("-7", "so it is -7.", True),
        ("1234", "the final answer is 1,234", True),
        ("8", "5 + 3 = 9", False),
        ("8", "no idea", False),
        ("8", "8 is wrong, it is 9", False),
    ],
)
def test_math_verifier(reference, completion, ok):
    v = verify_math(reference, completion)
    assert v["passed"] is ok and v["score"] == (1.0 if ok else 0.0)
    assert v["error"] is None and v["verify_seconds"] >= 0


def test_math_verifier_never_raises_on_hostile_text():
    v = verify_math("8", "\\boxed{" + "(" * 5000 + "}")
    assert v["passed"] is False
    v = verify_math("\\frac{", "\\boxed{8}")
    assert v["passed"] is False
    v = verify_math("", "\\boxed{8}")
    assert v["passed"] is False and v["error"] == "reference_unparsable"


def test_exact_verifier_and_registry():
    assert verify_exact("Paris", "The answer is paris.")["passed"]
    assert verify_exact("/\\d{3}/", "Answer: 123")["passed"]
    assert not verify_exact("/\\d{3}/", "Answer: 12")["passed"]
    assert verifier_for("rubric") is None and verifier_for("math") is not None and verifier_for("code") is not None


def _rates(**gen):
    return Rates.model_validate(
        {
            "expert": {"usd_per_hour": 60, "usd_per_hour_by_source": {"vip": 120}},
            "generation": [gen or {"model": "*", "unit": "tokens", "usd_per_m_input": 1.0, "usd_per_m_output": 2.0}],
            "verification": {"usd_per_cpu_hour": 3.6},
        }
    )


def test_expert_cost_prefers_own_cost_then_minutes_then_unpriced():
    rates = _rates()
    t = {"source": "v", "task_id": "t", "content_hash": "h"}
    assert expert_cost_row(dict(t, expert_cost_usd=3.0, expert_minutes=99), rates, "r")["usd"] == 3.0
    row = expert_cost_row(dict(t, expert_minutes=30), rates, "r")
    assert (row["usd"], row["unit"], row["quantity"]) == (30.0, "expert_minute", 30)
    assert expert_cost_row(dict(t, source="vip", expert_minutes=30), rates, "r")["usd"] == 60.0  # per-source rate
    row = expert_cost_row(t, rates, "r")
    assert (row["usd"], row["unit"]) == (0.0, "unpriced")


def test_expert_cost_table_is_expert_cost_row_of_every_task():
    """The batch path prices a chunk of results on its columns; each row
    must be what expert_cost_row says of that task, bit for bit (floats
    compared exactly: minutes / 60 * rate in that order)."""
    rng = random.Random(7)
    rates = Rates.model_validate(
        {
            "expert": {"usd_per_hour": 61.3, "usd_per_hour_by_source": {"vip": 127.9, "cheap": 0.0}},
            "generation": [{"model": "*", "unit": "tokens", "usd_per_m_input": 1.0, "usd_per_m_output": 2.0}],
            "verification": {"usd_per_cpu_hour": 3.6},
        }
    )
    amounts = [None, None, 0.0, 1e-9, 0.1, 7.0, 33.333, 1e6]
    tasks = [
        {
            "source": rng.choice(["v", "vip", "cheap", "other", "vïp\x1f"]),
            "task_id": f"t{i}",
            "content_hash": rng.choice([None, f"h{i}"]),
            "prompt": "p",
            "domain": "math",
            "expert_cost_usd": rng.choice(amounts),
            "expert_minutes": rng.choice(amounts),
        }
        for i in range(400)
    ]
    results = pa.Table.from_pylist(tasks, schema=RESULT_SCHEMA)
    got = expert_cost_table(results, rates, "run-1", COST_SCHEMA)
    want = pa.Table.from_pylist([expert_cost_row(t, rates, "run-1") for t in tasks], schema=COST_SCHEMA)
    assert got.schema == COST_SCHEMA
    assert got.to_pylist() == want.to_pylist()
    assert {r["unit"] for r in want.to_pylist()} == {"usd", "expert_minute", "unpriced"}  # every branch taken
    assert expert_cost_table(results.slice(0, 0), rates, "run-1", COST_SCHEMA).num_rows == 0


def test_attempt_costs_from_tokens_or_gpu_time_and_verifier_seconds():
    a = {
        "content_hash": "h",
        "attempt_idx": 2,
        "model_id": "m@1",
        "prompt_tokens": 1_000_000,
        "completion_tokens": 500_000,
        "gen_seconds": 36.0,
        "verify_seconds": 10.0,
    }
    gen, ver = attempt_cost_rows(a, ("v", "t"), _rates(), "r")
    assert gen["component"] == "generation" and gen["usd"] == pytest.approx(2.0) and gen["quantity"] == 1_500_000
    assert ver["component"] == "verification" and ver["usd"] == pytest.approx(0.01)
    assert gen["task_id"] == "t" and gen["attempt_idx"] == 2
    gpu = _rates(model="m", unit="gpu_hour", usd_per_gpu_hour=100.0)
    gen, _ = attempt_cost_rows(a, ("v", "t"), gpu, "r")
    assert (gen["usd"], gen["unit"], gen["quantity"]) == (pytest.approx(1.0), "gpu_second", 36.0)


def test_rates_file_errors_are_one_line(tmp_path):
    default = load_rates()
    assert default.for_model("HuggingFaceTB/SmolLM2-135M-Instruct@x").unit == "tokens"
    assert default.for_model("other@1").model == "*"
    no_wildcard = _rates(model="m", unit="tokens", usd_per_m_input=1, usd_per_m_output=1)
    with pytest.raises(ConfigError, match="no generation rate for model 'gpt-x'"):
        no_wildcard.for_model("gpt-x@2")
    f = tmp_path / "r.toml"
    body = "[expert]\nusd_per_hour = 1\n[verification]\nusd_per_cpu_hour = 1\n[[generation]]\nmodel = '*'\n"
    for tail, message in [
        ("unit = 'token'\n", "generation.0.unit: Input should be 'tokens' or 'gpu_hour'"),
        ("unit = 'tokens'\nusd_per_m_input = 1\n", "unit 'tokens' needs usd_per_m_input and usd_per_m_output"),
        ("unit = 'gpu_hour'\nusd_per_gpu_hour = -2\n", "usd_per_gpu_hour: Input should be greater than or equal to 0"),
    ]:
        f.write_text(body + tail)
        with pytest.raises(ConfigError, match=message):
            load_rates(f)
    f.write_text("[verification]\nusd_per_cpu_hour = 1\n")
    with pytest.raises(ConfigError, match="expert: Field required"):
        load_rates(f)


def test_config_errors_are_one_line(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text("[sampling]\nk = 0\n")
    with pytest.raises(ConfigError, match=r"sampling.k: Input should be greater than or equal to 1"):
        load_config(f)
    f.write_text("[samplin]\nk = 3\n")
    with pytest.raises(ConfigError, match="samplin: Extra inputs are not permitted"):
        load_config(f)
    f.write_text("[sampling\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(f)
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "missing.toml")
    f.write_text("[band]\nmin_pass_rate = 0.9\nmax_pass_rate = 0.1\n")
    with pytest.raises(ConfigError, match="must not exceed"):
        load_config(f)


def test_example_config_documents_the_defaults():
    from pathlib import Path

    from tasksieve.schemas.config import RunConfig

    example = Path(__file__).parents[2] / "tasksieve.example.toml"
    assert load_config(example) == RunConfig()
