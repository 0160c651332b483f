"""Known reward hacks, written as attempts, to try against a task's verifier
before any attempt is paid for (stage `verifier_sanity`).

A probe is (name, kind, what it does, the attempt's text). `kind` is
`null` (an answer that knows nothing: empty, "I don't know", a constant)
or `hack` (an answer that games the check: spraying numbers, boxing every
guess, an object whose == is always true, exiting before the asserts...).
Any probe that passes means the verifier rewards something other than a
right answer: the task is dropped, with the probe named. The same list is
the regression suite of the verifiers themselves (tests/test_hacks.py):
on a sound task, every probe must fail.

Beam-free, no I/O: building probes never runs anything.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass


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
        Probe("boxed_several", "hack", "a wrong boxed answer, then the reference boxed",
              f"\\boxed{{{wrong}}} or maybe \\boxed{{{ref}}}"),
        Probe("boxed_several_reversed", "hack", "the reference boxed, then a wrong boxed answer",
              f"\\boxed{{{ref}}}, or else \\boxed{{{wrong}}}"),
        Probe("phrase_alternatives", "hack", "'the answer is <wrong> or <reference>'",
              f"The answer is {wrong} or {ref}."),
        Probe("phrase_list", "hack", "'final answer: <list of guesses with the reference>'",
              f"Final answer: {wrong}, {ref}, 0, 1"),
        Probe("phrase_several", "hack", "two answer phrases, the reference last",
              f"The answer is {wrong}.\nThe answer is {ref}."),
        Probe("echo_then_guess", "hack", "the prompt echoed, ending in a wrong guess",
              f"{prompt}\nSo the answer is {wrong}."),
    ]


def first_expected_output(tests: str):
    """The right-hand side of the first `assert <call> == <literal>` in the
    tests (a constant answer that matches the first example), else None."""
    try:
        tree = ast.parse(tests)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare) and len(node.test.ops) == 1 \
                and isinstance(node.test.ops[0], ast.Eq) and isinstance(node.test.left, ast.Call):
            try:
                return ast.literal_eval(node.test.comparators[0])
            except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
                continue
    return None


_ALWAYS_EQUAL = '''class _Anything:
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
'''


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
        Probe("echo_input", "hack", "a function returning its first argument",
              sig + "    return args[0] if args else next(iter(kwargs.values()), None)\n"),
        Probe("always_equal", "hack", "an object whose == is always true",
              _ALWAYS_EQUAL + sig + "    return _Anything()\n"),
        Probe("int_subclass_equal", "hack", "an int subclass whose == is always true",
              "class _Int(int):\n    def __eq__(self, o): return True\n    def __ne__(self, o): return False\n"
              "    __hash__ = int.__hash__\n" + sig + "    return _Int(0)\n"),
        Probe("str_subclass_equal", "hack", "a str subclass whose == is always true",
              "class _Str(str):\n    def __eq__(self, o): return True\n    def __ne__(self, o): return False\n"
              "    __hash__ = str.__hash__\n" + sig + "    return _Str('')\n"),
        Probe("exit_before_asserts", "hack", "the process exits with status 0 before any test runs",
              "import os\nos._exit(0)\n" + sig + "    return None\n"),
        Probe("system_exit_in_call", "hack", "SystemExit(0) raised from the function",
              sig + "    raise SystemExit(0)\n"),
        Probe("stop_iteration", "hack", "StopIteration raised from the function (ends a map() early)",
              sig + "    raise StopIteration\n"),
        Probe("patch_builtins", "hack", "assert-relevant builtins patched: exec, compile (optimize=2), abs, "
              "isinstance, len, math.isclose; and its own check()",
              "import builtins, math\n_c = builtins.compile\n"
              "builtins.exec = lambda *a, **k: None\n"
              "builtins.compile = lambda s, f, m, *a, **k: _c(s, f, m, optimize=2)\n"
              "builtins.abs = lambda x: 0\nbuiltins.isinstance = lambda *a: True\nbuiltins.len = lambda x: 0\n"
              "math.isclose = lambda *a, **k: True\n"
              "def check(candidate):\n    return True\n" + sig + "    return None\n"),
        Probe("forge_verdict", "hack", "a fake verdict printed and written to every open descriptor",
              "import os, json\n"
              "for fd in range(0, 40):\n"
              "    try:\n"
              "        os.write(fd, (json.dumps({'passed': True, 'error': None, 'calls': 1}) + '\\n').encode())\n"
              "    except OSError:\n"
              "        pass\n"
              "print('passed')\n" + sig + "    return None\n"),
        Probe("generator", "hack", "a lazy object instead of a value", sig + "    return (x for x in ())\n"),
    ]
    expected = first_expected_output(task.get("tests") or "")
    if expected is not None:
        probes.append(Probe("first_expected_output", "null", "a constant: the first test's expected output",
                            sig + f"    return {expected!r}\n"))
    return probes
