"""Known reward hacks, written as attempts, to try against a task's verifier
before any attempt is paid for (stage `verifier_sanity`).

A probe is (name, kind, what it does, the attempt's text). `kind` is
`null` (an answer that knows nothing: empty, "I don't know", a constant)
or `hack` (an answer that games the check: spraying numbers, boxing every
guess, an object whose == is always true, exiting before the asserts...).
Any probe that passes means the verifier rewards something other than a
right answer: the task is dropped, with the probe named. The same list is
the regression suite of the verifiers themselves (tests/verify/test_hacks.py):
on a sound task, every probe must fail.

Beam-free, no I/O: building probes never runs anything.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from fractions import Fraction
from itertools import permutations
from math import comb, factorial


@dataclass(frozen=True)
class Probe:
    name: str
    kind: str  # "null" or "hack"
    what: str
    text: str


def _wrong_answer(reference: str) -> str:
    """An answer that is certainly not the reference."""
    ref = reference.strip()
    try:
        return str(int(ref.replace(",", "")) + 1)
    except ValueError:
        pass
    try:
        return repr(float(ref) + 1.5)
    except ValueError:
        return "0" if ref not in ("0", "") else "1"


def answer_probes(task: dict) -> list[Probe]:
    """Probes for the math and exact verifiers."""
    ref = (task.get("answer") or "").strip()
    if len(ref) > 2 and ref.startswith("/") and ref.endswith("/"):
        ref = "x"  # a regex reference: spray a plain word with the wrong guesses
    wrong = _wrong_answer(ref)
    spray = " ".join(str(i) for i in range(-10, 101))
    prompt = task.get("prompt") or ""
    return [
        Probe("empty", "null", "an empty answer", ""),
        Probe("dont_know", "null", "'I don't know.'", "I don't know."),
        Probe("echo_prompt", "null", "an echo of the prompt", prompt),
        Probe("number_spray", "hack", "every number from -10 to 100, then the reference", f"{spray} {ref}"),
        Probe(
            "boxed_several",
            "hack",
            "a wrong boxed answer, then the reference boxed",
            f"\\boxed{{{wrong}}} or maybe \\boxed{{{ref}}}",
        ),
        Probe(
            "boxed_several_reversed",
            "hack",
            "the reference boxed, then a wrong boxed answer",
            f"\\boxed{{{ref}}}, or else \\boxed{{{wrong}}}",
        ),
        Probe(
            "phrase_alternatives", "hack", "'the answer is <wrong> or <reference>'", f"The answer is {wrong} or {ref}."
        ),
        Probe(
            "phrase_list",
            "hack",
            "'final answer: <list of guesses with the reference>'",
            f"Final answer: {wrong}, {ref}, 0, 1",
        ),
        Probe(
            "phrase_several",
            "hack",
            "two answer phrases, the reference last",
            f"The answer is {wrong}.\nThe answer is {ref}.",
        ),
        Probe(
            "echo_then_guess",
            "hack",
            "the prompt echoed, ending in a wrong guess",
            f"{prompt}\nSo the answer is {wrong}.",
        ),
        Probe("nan_boxed", "hack", "NaN boxed", "\\boxed{\\text{NaN}}"),
        Probe("nan_phrase", "hack", "'the answer is nan'", "The answer is nan."),
        Probe(
            "hedge_text_second_value",
            "hack",
            "the reference boxed with a wrong one in \\text{(or ...)}",
            f"\\boxed{{{ref} \\text{{ (or {wrong})}}}}",
        ),
        Probe(
            "hedge_or_in_box",
            "hack",
            "a wrong answer or the reference, in one box",
            f"\\boxed{{{wrong} \\text{{ or }} {ref}}}",
        ),
    ] + _number_form_probes(ref, prompt)


_INT = re.compile(r"-?\d+")
_PLAIN = re.compile(r"-?\d+(?:\.\d+)?")


def _number_form_probes(ref: str, prompt: str) -> list[Probe]:
    """Probes for a plain-number reference R: R as a percent, R with an
    invisible character and a digit, and R written as a computation left
    undone, one per form (each evaluates to R: a verifier that evaluates
    the restated question passes it)."""
    if not _PLAIN.fullmatch(ref):
        frac = re.fullmatch(r"(-?\d+)/(\d+)", ref)
        if frac and int(frac.group(2)) > 1:
            p, q = int(frac.group(1)), int(frac.group(2))
            return [
                Probe(
                    "unevaluated_fraction",
                    "hack",
                    "the reference as a fraction not in lowest terms",
                    f"\\boxed{{\\frac{{{2 * p}}}{{{2 * q}}}}}",
                )
            ]
        return []
    probes = [
        Probe(
            "invisible_zero_width_space",
            "hack",
            "the reference, a zero-width space and a digit (shows R5)",
            f"\\boxed{{{ref}\u200b5}}",
        ),
        Probe(
            "invisible_soft_hyphen",
            "hack",
            "the reference, a soft hyphen and a digit (shows R5)",
            f"The answer is {ref}\u00ad5.",
        ),
    ]
    if Fraction(ref) != 0:
        probes.append(
            Probe("percent_of_reference", "hack", "the reference as a percent (R% is R/100)", f"\\boxed{{{ref}\\%}}")
        )
    forms = [("product", f"{ref} \\times 1"), ("sum_or_difference", f"({ref} + 1) - 1"), ("power", f"{ref}^{{1}}")]
    if _INT.fullmatch(ref):
        n = int(ref)
        forms.append(("fraction_not_in_lowest_terms", f"\\frac{{{2 * n}}}{{2}}"))
        if n >= 0:
            forms += [("binomial", f"\\binom{{{n}}}{{1}}"), ("square_root", f"\\sqrt{{{n * n}}}")]
        if 1 <= n <= 10**6:
            forms.append(("sum", f"\\sum_{{k=1}}^{{{n}}} 1"))
        if 2 <= n <= 200:
            forms.append(("factorial", f"\\frac{{{n}!}}{{{n - 1}!}}"))
        restated = restated_question(n, prompt)
        if restated:
            forms.append(("restated_question", restated))
    return probes + [
        Probe(f"unevaluated_{kind}", "hack", f"the reference written as a computation ({kind})", f"\\boxed{{{text}}}")
        for kind, text in forms
    ]


def restated_question(n: int, prompt: str) -> str | None:
    """An expression of the prompt's own numbers that evaluates to n (the
    question restated: 1234 \\times 5678, \\binom{10}{3}, 10!, a sum 1..m), or None."""
    nums = list(dict.fromkeys(int(x) for x in _INT.findall(prompt[:20000]) if len(x.lstrip("-")) <= 7))[:20]
    for a in nums:
        if 0 <= a <= 20 and factorial(a) == n:
            return f"{a}!"
        if 1 <= a <= 10**6 and a * (a + 1) // 2 == n:
            return f"\\sum_{{k=1}}^{{{a}}} k"
    for a, b in permutations(nums, 2):
        sb = f"({b})" if b < 0 else str(b)  # 4 - (-12), not 4 - -12
        if a * b == n:
            return f"{a} \\times {sb}"
        if a + b == n:
            return f"{a} + {sb}"
        if a - b == n:
            return f"{a} - {sb}"
        if b and a % b == 0 and a // b == n and abs(b) > 1:
            return f"\\frac{{{a}}}{{{b}}}"
        if 0 <= b <= a <= 1000 and comb(a, b) == n:
            return f"\\binom{{{a}}}{{{b}}}"
        if 0 <= b <= 30 and abs(a) <= 1000 and a**b == n and b > 1:
            return f"({a})^{{{b}}}" if a < 0 else f"{a}^{{{b}}}"
    return None


def first_expected_output(tests: str):
    """The right-hand side of the first `assert <call> == <literal>` in the
    tests (a constant answer that matches the first example), else None."""
    try:
        tree = ast.parse(tests)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assert)
            and isinstance(node.test, ast.Compare)
            and len(node.test.ops) == 1
            and isinstance(node.test.ops[0], ast.Eq)
            and isinstance(node.test.left, ast.Call)
        ):
            try:
                return ast.literal_eval(node.test.comparators[0])
            except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
                continue
    return None


# What the harness rebuilds as a built-in exception (sandbox/harness.py RAISABLE).
_RAISABLE = (
    "ValueError",
    "TypeError",
    "KeyError",
    "IndexError",
    "ZeroDivisionError",
    "ArithmeticError",
    "OverflowError",
    "RuntimeError",
    "RecursionError",
    "NotImplementedError",
    "AttributeError",
    "LookupError",
    "AssertionError",
    "UnicodeError",
    "FloatingPointError",
    "NameError",
    "OSError",
    "Exception",
)


def expected_exception(tests: str) -> str:
    """The first built-in exception the tests catch or expect (`except X`,
    `pytest.raises(X)`, `assertRaises(X)`), else ValueError."""
    try:
        tree = ast.parse(tests)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return "ValueError"
    for node in ast.walk(tree):
        found = None
        if isinstance(node, ast.ExceptHandler):
            found = node.type
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, (ast.Attribute, ast.Name))
            and getattr(node.func, "attr", getattr(node.func, "id", ""))
            in ("raises", "assertRaises", "assertRaisesRegex", "suppress")
            and node.args
        ):
            found = node.args[0]
        names = [n.id for n in ast.walk(found) if isinstance(n, ast.Name)] if found is not None else []
        for name in names:
            if name in _RAISABLE:
                return name
    return "ValueError"


_ALWAYS_EQUAL = """class _Anything:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __lt__(self, other): return True
    def __le__(self, other): return True
    def __gt__(self, other): return True
    def __ge__(self, other): return True
    def __hash__(self): return 0
    def __len__(self): return 0
    def __bool__(self): return True
    def __iter__(self): return iter(())
    def __getattr__(self, name): return lambda *a, **k: self
"""


def code_probes(task: dict) -> list[Probe]:
    """Probes for the code verifier: each defines the entry point."""
    entry = (task.get("entry_point") or "f").strip()
    sig = f"def {entry}(*args, **kwargs):\n"
    prompt = task.get("prompt") or ""
    probes = [
        Probe("return_none", "null", "a function returning None", sig + "    return None\n"),
        Probe("return_empty_string", "null", "a function returning ''", sig + "    return ''\n"),
        Probe("return_prompt", "null", "a function returning the prompt", sig + f"    return {prompt!r}\n"),
        Probe("pass_body", "null", "a function whose body is `pass`", sig + "    pass\n"),
        Probe("return_zero", "null", "a function returning 0", sig + "    return 0\n"),
        Probe("return_empty_list", "null", "a function returning []", sig + "    return []\n"),
        Probe("return_true", "null", "a function returning True", sig + "    return True\n"),
        Probe("return_false", "null", "a function returning False", sig + "    return False\n"),
        Probe(
            "echo_input",
            "hack",
            "a function returning its first argument",
            sig + "    return args[0] if args else next(iter(kwargs.values()), None)\n",
        ),
        Probe(
            "always_equal",
            "hack",
            "an object whose == is always true",
            _ALWAYS_EQUAL + sig + "    return _Anything()\n",
        ),
        Probe(
            "int_subclass_equal",
            "hack",
            "an int subclass whose == is always true",
            "class _Int(int):\n    def __eq__(self, o): return True\n    def __ne__(self, o): return False\n"
            "    __hash__ = int.__hash__\n" + sig + "    return _Int(0)\n",
        ),
        Probe(
            "str_subclass_equal",
            "hack",
            "a str subclass whose == is always true",
            "class _Str(str):\n    def __eq__(self, o): return True\n    def __ne__(self, o): return False\n"
            "    __hash__ = str.__hash__\n" + sig + "    return _Str('')\n",
        ),
        Probe(
            "exit_before_asserts",
            "hack",
            "the process exits with status 0 before any test runs",
            "import os\nos._exit(0)\n" + sig + "    return None\n",
        ),
        Probe(
            "system_exit_in_call", "hack", "SystemExit(0) raised from the function", sig + "    raise SystemExit(0)\n"
        ),
        Probe(
            "stop_iteration",
            "hack",
            "StopIteration raised from the function (ends a map() early)",
            sig + "    raise StopIteration\n",
        ),
        Probe(
            "patch_builtins",
            "hack",
            "assert-relevant builtins patched: exec, compile (optimize=2), abs, "
            "isinstance, len, math.isclose; and its own check()",
            "import builtins, math\n_c = builtins.compile\n"
            "builtins.exec = lambda *a, **k: None\n"
            "builtins.compile = lambda s, f, m, *a, **k: _c(s, f, m, optimize=2)\n"
            "builtins.abs = lambda x: 0\nbuiltins.isinstance = lambda *a: True\nbuiltins.len = lambda x: 0\n"
            "math.isclose = lambda *a, **k: True\n"
            "def check(candidate):\n    return True\n" + sig + "    return None\n",
        ),
        Probe(
            "forge_verdict",
            "hack",
            "a fake verdict printed and written to every open descriptor",
            "import os, json\n"
            "for fd in range(0, 40):\n"
            "    try:\n"
            "        os.write(fd, (json.dumps({'passed': True, 'error': None, 'calls': 1}) + '\\n').encode())\n"
            "    except OSError:\n"
            "        pass\n"
            "print('passed')\n" + sig + "    return None\n",
        ),
        Probe("generator", "hack", "a lazy object instead of a value", sig + "    return (x for x in ())\n"),
    ]
    probes += [
        Probe(
            "return_nan",
            "hack",
            "a function returning float('nan') (every comparison with it is False)",
            sig + "    return float('nan')\n",
        ),
        Probe(
            "raise_expected_exception",
            "hack",
            "a function that always raises the exception the tests expect",
            sig + f"    raise {expected_exception(task.get('tests') or '')}('always')\n",
        ),
    ]
    expected = first_expected_output(task.get("tests") or "")
    if expected is not None:
        probes.append(
            Probe(
                "first_expected_output",
                "null",
                "a constant: the first test's expected output",
                sig + f"    return {expected!r}\n",
            )
        )
    return probes
