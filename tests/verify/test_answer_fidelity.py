"""Answer fidelity (issues 48 and 49): a final answer passes only when it IS
the value, as a reader sees it. Invisible characters inside a number, a
percent read as a plain number, a hedge inside a box, and the question
restated as an unevaluated computation are all refused; the hack probes
of verifier_sanity carry each of them, so a verifier that accepts one of
them is dropped with `hack_probe_passes` (answer_form.py, hack_probes.py)."""

import pytest

from tasksieve.schemas.config import VerifyConfig
from tasksieve.transforms.verify import answer_form, hack_probes
from tasksieve.transforms.verify.sanity import check_verifier
from tasksieve.transforms.verify.verifiers import verify_exact, verify_one

SETTINGS = VerifyConfig(math_timeout_s=6)


def _math(answer, prompt="Compute it."):
    return {"domain": "math", "answer": answer, "prompt": prompt}


def _passes(answer, completion, prompt="Compute it."):
    return verify_one(_math(answer, prompt), completion, SETTINGS)["passed"]


# --- invisible characters ------------------------------------------------------------------

INVISIBLE = [
    "\u200b",
    "\u200c",
    "\u200d",
    "\u00ad",
    "\ufeff",
    "\u2060",
    "\u200e",
    "\u202e",
    "\u2066",
    "\u2062",
    "\u180e",
    "\u3164",
    "\u034f",
    "\U000e0031",
    "\ufe0f",
    "\u2800",
    "\x00",
    "\u061c",
    "\u2063",
]


@pytest.mark.parametrize("ch", INVISIBLE, ids=[f"U+{ord(c):04X}" for c in INVISIBLE])
def test_an_invisible_character_inside_a_number_is_refused(ch):
    """Displayed "65", read as 6 before: refused, never joined or split."""
    for completion in (f"\\boxed{{6{ch}5}}", f"The answer is 6{ch}5.", f"\\boxed{{{ch}6}}", f"\\boxed{{6{ch}}}"):
        v = verify_one(_math("6"), completion, SETTINGS)
        assert not v["passed"], (completion, v)
    assert not _passes("65", f"\\boxed{{6{ch}5}}")
    assert not verify_exact("6", f"Final answer: 6{ch}5")["passed"]


@pytest.mark.parametrize(
    "mark",
    ["\u0301", "\u20e3", "\u0338", "\u20dd", "\u0335", "\u0336", "\u0489"],
    ids=["acute", "keycap", "long_solidus", "enclosing_circle", "short_stroke", "long_stroke", "cyrillic_millions"],
)
def test_a_combining_mark_on_a_digit_is_refused(mark):
    """`6\u0301 5` displays as a marked digit; it was graded 6."""
    for completion in (
        f"\\boxed{{6{mark}5}}",
        f"\\boxed{{6{mark}}}",
        f"The answer is 6{mark}.",
        f"We are done. It is 6{mark}.",
    ):
        v = verify_one(_math("6"), completion, SETTINGS)
        assert not v["passed"], (completion, v)
    assert _passes("6", "\\boxed{6 \\text{ caf\u00e9s}}")  # a mark on a letter is not on a digit


def test_invisible_characters_next_to_the_last_number_are_refused():
    v = verify_one(_math("5"), "We add them up. So the total is 5\u200b.", SETTINGS)
    assert not v["passed"] and v["error"] == "invisible_character"
    assert _passes("5", "We add them up. So the total is 5.")  # the same without it


# --- percent -------------------------------------------------------------------------------

PERCENT_SPELLINGS = [
    "6\\%",
    "6%",
    "6 \\%",
    "6\\,\\%",
    "6 percent",
    "6\\text{%}",
    "6\\text{ percent}",
    "6％",
    "6{\\%}",
    "6\\percent",
    "6 per cent",
    "6\\mathrm{\\%}",
    "6\\ \\%",
    "6\\text{\\%}",
]


@pytest.mark.parametrize("spelling", PERCENT_SPELLINGS)
def test_a_percent_is_compared_as_a_percent(spelling):
    assert not _passes("6", f"\\boxed{{{spelling}}}")  # 6% is 0.06, not 6
    assert _passes("0.06", f"\\boxed{{{spelling}}}")
    assert _passes("6\\%", f"\\boxed{{{spelling}}}")
    assert _passes("3/50", f"\\boxed{{{spelling}}}")


@pytest.mark.parametrize(
    "spelling,number,value",
    [
        ("5‰", "5", "0.005"),
        ("5 per mille", "5", "0.005"),
        ("5\\permil", "5", "0.005"),
        ("25 bps", "25", "0.0025"),
        ("3‱", "3", "0.0003"),
    ],
)
def test_per_mille_and_basis_points_are_read_as_such(spelling, number, value):
    assert not _passes(number, f"\\boxed{{{spelling}}}")
    assert _passes(value, f"\\boxed{{{spelling}}}")


def test_a_percent_reference_is_a_percent_too():
    for candidate in ("6\\%", "6%", "0.06", "\\frac{3}{50}", "6 percent"):
        assert _passes("6\\%", f"\\boxed{{{candidate}}}"), candidate
    assert not _passes("6\\%", "\\boxed{6}")
    assert _passes("12.5\\%", "\\boxed{0.125}") and not _passes("12.5\\%", "\\boxed{12.5}")
    assert not _passes("6", "The answer is 6%.")
    assert answer_form.percent_value("1,200\\%") == "12"


# --- hedges --------------------------------------------------------------------------------

HEDGES = [
    "5 \\text{ (or 6)}",
    "5 \\text{ or } 6",
    "5 \\textbf{ or } 6",
    "5 \\mbox{ or } 6",
    "5 \\mathrm{or} 6",
    "5 or 6",
    "5 \\textit{(maybe 6)}",
    "5 \\lor 6",
    "5 \\vee 6",
    "5 \\text{ possibly } 6",
    "5\\ (\\text{or } 6)",
    "5 \\quad \\text{(alternatively 6)}",
    "5 \\text{ (approx. } 6)",
    "5 \\textrm{ or perhaps } 6",
    "5 \\operatorname{or} 6",
    "6 \\text{ or } 5",
    "5 \\text{ (6 if repeats are allowed)}",
    "5 \\text{ else } 6",
    "5 \\ \\text{or}\\ 6",
    "5 \\textsf{ either way, } 6",
    "5–6",
    "5 — 6",
    "5 \\pm 1",
    "5 ± 1",
    "5\\ \\text{(}6\\text{)}",
    "5 \\text{ to } 6",
    "5 \\,\\text{or}\\, 6",
    "5 \\ \\mathrm{vs.}\\ 6",
    "5 \\text{ or }",
]


@pytest.mark.parametrize("hedge", HEDGES)
def test_a_hedge_inside_a_box_or_an_answer_phrase_fails(hedge):
    v = verify_one(_math("5"), f"\\boxed{{{hedge}}}", SETTINGS)
    assert not v["passed"] and v["error"] == "hedged_answer", v
    assert not _passes("5", f"The final answer is {hedge}.")


def test_units_and_text_without_a_second_value_still_pass():
    for completion in (
        "\\boxed{5 \\text{ cm}}",
        "\\boxed{\\text{5}}",
        "\\boxed{5}",
        "\\boxed{5 \\text{ apples}}",
        "\\boxed{5\\text{ m}^2}",
    ):
        assert _passes("5", completion), completion
    assert _passes("5 \\text{ or } 6", "\\boxed{5 \\text{ or } 6}")  # the reference hedges the same way


# --- unevaluated computation ---------------------------------------------------------------

UNEVALUATED = [
    ("7006652", "1234*5678", "Compute 1234 times 5678."),
    ("7006652", "1234 \\times 5678", "Compute 1234 times 5678."),
    ("7006652", "1234 \\cdot 5678", "Compute 1234 times 5678."),
    ("7006652", "(1234)(5678)", "Compute 1234 times 5678."),
    ("7006652", "1234 × 5678", "Compute 1234 times 5678."),
    ("120", "\\binom{10}{3}", "In how many ways can 3 of 10 people be chosen?"),
    ("120", "\\dbinom{10}{3}", "In how many ways can 3 of 10 people be chosen?"),
    ("120", "C(10,3)", "In how many ways can 3 of 10 people be chosen?"),
    ("120", "{10 \\choose 3}", "In how many ways can 3 of 10 people be chosen?"),
    ("120", "\\frac{10!}{3!\\,7!}", "In how many ways can 3 of 10 people be chosen?"),
    ("5050", "\\sum_{k=1}^{100} k", "Add the integers from 1 to 100."),
    ("5050", "\\frac{100 \\cdot 101}{2}", "Add the integers from 1 to 100."),
    ("3628800", "10!", "In how many orders can 10 books stand?"),
    ("3628800", "10 \\cdot 9!", "In how many orders can 10 books stand?"),
    ("1024", "2^{10}", "How many subsets has a set of 10 elements?"),
    ("1024", "2^10", "How many subsets has a set of 10 elements?"),
    ("1024", "2**10", "How many subsets has a set of 10 elements?"),
    ("3/4", "\\frac{6}{8}", "6 of 8 marbles are red. What fraction is red?"),
    ("3/4", "6/8", "6 of 8 marbles are red. What fraction is red?"),
    ("42", "\\frac{84}{2}", "Halve 84."),
    ("42", "84/2", "Halve 84."),
    ("42", "84 \\div 2", "Halve 84."),
    ("42", "40+2", "Add 40 and 2."),
    ("42", "44-2", "Take 2 from 44."),
    ("4", "\\sqrt{16}", "What is the square root of 16?"),
    ("6", "\\prod_{k=1}^{3} k", "Multiply 1, 2 and 3."),
    ("42", "\\gcd(84,126)", "Find the gcd of 84 and 126."),
    ("42", "\\operatorname{lcm}(6,7)", "Find the lcm of 6 and 7."),
    ("42", "\\lfloor 42.5 \\rfloor", "Round 42.5 down."),
    ("3", "\\sqrt[3]{27}", "Find the cube root of 27."),
    ("8", "\\left(\\frac{1}{2}\\right)^{-3}", "Compute (1/2)^(-3)."),
    ("1", "\\frac{7}{7}", "Divide 7 by 7."),
    ("7006652", "7006652 = 1234 \\times 5678", "Compute 1234 times 5678."),
    ("120", "P(10,3) / 3!", "In how many ways can 3 of 10 people be chosen?"),
]


@pytest.mark.parametrize("reference,answer,prompt", UNEVALUATED, ids=[a for _, a, _ in UNEVALUATED])
def test_an_unevaluated_expression_is_not_an_answer(reference, answer, prompt):
    v = verify_one(_math(reference, prompt), f"\\boxed{{{answer}}}", SETTINGS)
    assert not v["passed"] and v["error"].startswith("unevaluated_expression"), v


@pytest.mark.parametrize(
    "reference,answer",
    [
        ("3/4", "\\frac{3}{4}"),
        ("0.75", "\\frac{3}{4}"),
        ("3/4", "0.75"),
        ("\\sqrt{2}", "\\sqrt{2}"),
        ("2\\sqrt{3}", "2\\sqrt{3}"),
        ("\\frac{\\pi}{2}", "\\pi/2"),
        ("\\pi", "\\pi"),
        ("-5", "-5"),
        ("120000", "1.2 \\times 10^{5}"),
        ("120000", "1.2 \\cdot 10^{5}"),
        ("x^2+1", "x^2+1"),
        ("2+\\sqrt{3}", "2+\\sqrt{3}"),
        ("2^{10}", "2^{10}"),
        ("2^{10}", "1024"),
        ("-\\frac{3}{4}", "-\\frac{3}{4}"),
        ("(-3, 5)", "(-3, 5)"),
        ("42", "42^\\circ"),
        ("7006652", "7,006,652"),
        ("\\frac{\\sqrt{3}}{2}", "\\frac{\\sqrt{3}}{2}"),
        ("\\frac{1+\\sqrt{5}}{2}", "\\frac{1+\\sqrt{5}}{2}"),
        ("7006652", "1234 \\times 5678 = 7006652"),
        ("5", "x = 5"),
    ],
)
def test_value_forms_still_pass(reference, answer):
    v = verify_one(_math(reference), f"\\boxed{{{answer}}}", SETTINGS)
    assert v["passed"], v


@pytest.mark.parametrize(
    "completion", ["\\boxed{nan}", "\\boxed{\\text{NaN}}", "The answer is NaN.", "\\boxed{\\mathrm{nan}}"]
)
def test_nan_is_not_an_answer(completion):
    v = verify_one(_math("3"), completion, SETTINGS)
    assert not v["passed"], v


# --- the probes: a verifier that accepts any of these forms is dropped ---------------------


def _old_verifier(monkeypatch):
    """The verifier as it was: no refusals, a percent read as a number."""
    monkeypatch.setattr(answer_form, "refusal", lambda answer, reference: None)
    monkeypatch.setattr(answer_form, "percent_value", lambda text: text.replace("\\%", "").replace("%", ""))


@pytest.mark.parametrize(
    "task,probes",
    [
        (
            _math("7006652", "Compute 1234 times 5678."),
            {
                "unevaluated_restated_question",
                "unevaluated_product",
                "unevaluated_binomial",
                "unevaluated_power",
                "unevaluated_sum_or_difference",
                "unevaluated_square_root",
                "unevaluated_fraction_not_in_lowest_terms",
                "hedge_text_second_value",
                "invisible_zero_width_space",
                "invisible_soft_hyphen",
                "percent_of_reference",
            },
        ),
        (
            _math("120", "In how many ways can 3 of 10 people be chosen?"),
            {"unevaluated_restated_question", "unevaluated_sum", "unevaluated_factorial"},
        ),
        (_math("3628800", "In how many orders can 10 books stand?"), {"unevaluated_restated_question"}),
        (_math("5050", "Add the integers from 1 to 100."), {"unevaluated_restated_question"}),
        (_math("3/4", "6 of 8 marbles are red. What fraction is red?"), {"unevaluated_fraction"}),
    ],
    ids=["product", "binomial", "factorial", "sum", "fraction"],
)
def test_a_verifier_that_accepts_these_forms_is_dropped_naming_the_probe(monkeypatch, task, probes):
    _old_verifier(monkeypatch)
    v = check_verifier(task, SETTINGS)
    assert v["broken"] and "hack_probe_passes" in v["reasons"], v
    named = {p.split("'")[1] for p in v["problems"] if p.startswith("probe '")}
    assert probes <= named, probes - named


@pytest.mark.parametrize(
    "task",
    [
        _math("7006652", "Compute 1234 times 5678."),
        _math("120", "In how many ways can 3 of 10 people be chosen?"),
        _math("3628800", "In how many orders can 10 books stand?"),
        _math("5050", "Add the integers from 1 to 100."),
        _math("3/4", "6 of 8 marbles are red. What fraction is red?"),
        _math("0", "Compute 5 - 5."),
        _math("-3", "Find the minimum of x^2 + 6x + 6."),
        _math("0.5", "Halve 1."),
        _math("6\\%", "What percent?"),
        _math("\\sqrt{2}", "Find the diagonal of a unit square."),
        _math("x+1", "Simplify (x^2-1)/(x-1)."),
        {"domain": "exact", "answer": "42", "prompt": "Multiply 6 by 7."},
    ],
    ids=[
        "product",
        "binomial",
        "factorial",
        "sum",
        "fraction",
        "zero",
        "negative",
        "decimal",
        "percent",
        "surd",
        "expression",
        "exact",
    ],
)
def test_every_new_probe_fails_on_a_sound_task(task):
    assert check_verifier(task, SETTINGS) == {"broken": False, "problems": [], "reasons": [], "executed": True}
    names = {p.name for p in hack_probes.answer_probes(task)}
    assert {"nan_boxed", "hedge_text_second_value", "hedge_or_in_box"} <= names
