import pytest

from tasksieve.schemas.config import ConfigError, RatesConfig, load_config
from tasksieve.transforms.costs import attempt_cost_rows, expert_cost_row
from tasksieve.transforms.verifiers import verify_exact, verifier_for
from tasksieve.transforms.verify_math import extract_final_answer, verify_math


@pytest.mark.parametrize("completion,expected,rule", [
    ("so we get \\boxed{\\frac{1}{2}} done", "\\frac{1}{2}", "boxed"),
    ("\\boxed{3} first, then \\boxed{4}", "4", "boxed"),
    ("Adding them, the final answer is 12.", "12", "phrase"),
    ("Answer: 1,234", "1,234", "phrase"),
    ("5 + 3 = 8. So there are 8 apples.", "8", "last_result"),
    ("4 + 4 = 8, the result of adding 4 to itself once.", "8", "last_result"),
    ("6 and 8 together, which equals 14, for 2 kids", "14", "last_result"),
    ("2 + 6 = 8. So the answer is straightforward.", "8", "last_result"),
    ("There are 3 cats and 5 dogs, so 8 pets.", "8", "last_number"),
    ("I cannot tell.", None, "none"),
    ("", None, "empty"),
])
def test_answer_extraction_rules(completion, expected, rule):
    assert extract_final_answer(completion) == (expected, rule)


@pytest.mark.parametrize("reference,completion,ok", [
    ("8", "5 + 3 = 8", True),
    ("8", "The answer is \\boxed{8}", True),
    ("0.5", "\\boxed{\\frac{1}{2}}", True),
    ("-7", "so it is -7.", True),
    ("1234", "the final answer is 1,234", True),
    ("8", "5 + 3 = 9", False),
    ("8", "no idea", False),
    ("8", "8 is wrong, it is 9", False),
])
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
    assert v["passed"] is False and "could not be parsed" in v["error"]


def test_exact_verifier_and_registry():
    assert verify_exact("Paris", "The answer is paris.")["passed"]
    assert verify_exact("/\\d{3}/", "Answer: 123")["passed"]
    assert not verify_exact("/\\d{3}/", "Answer: 12")["passed"]
    assert verifier_for("code") is None and verifier_for("math") is not None


def test_expert_cost_prefers_own_cost_then_minutes_then_unpriced():
    rates = RatesConfig(expert_usd_per_hour=60)
    t = {"source": "v", "task_id": "t", "content_hash": "h"}
    assert expert_cost_row(dict(t, expert_cost_usd=3.0, expert_minutes=99), rates, "r")["usd"] == 3.0
    row = expert_cost_row(dict(t, expert_minutes=30), rates, "r")
    assert (row["usd"], row["unit"], row["quantity"]) == (30.0, "expert_minute", 30)
    row = expert_cost_row(t, rates, "r")
    assert (row["usd"], row["unit"]) == (0.0, "unpriced")


def test_attempt_costs_from_tokens_and_verifier_seconds():
    rates = RatesConfig(gen_usd_per_m_input=1.0, gen_usd_per_m_output=2.0, verify_usd_per_cpu_hour=3.6)
    a = {"content_hash": "h", "attempt_idx": 2, "prompt_tokens": 1_000_000, "completion_tokens": 500_000, "verify_seconds": 10.0}
    gen, ver = attempt_cost_rows(a, ("v", "t"), rates, "r")
    assert gen["component"] == "generation" and gen["usd"] == pytest.approx(2.0) and gen["quantity"] == 1_500_000
    assert ver["component"] == "verification" and ver["usd"] == pytest.approx(0.01)
    assert gen["task_id"] == "t" and gen["attempt_idx"] == 2


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

    example = Path(__file__).parents[1] / "tasksieve.example.toml"
    assert load_config(example) == RunConfig()
