"""Code fidelity (issue 48): the tests see what calling the function in
their own process would show. An attempt that mutates its argument, or
returns the argument object itself, fails tests written to forbid that,
and tests that expect an in-place change can pass (harness.py, "Mutation
and identity"). The NaN and always-raise probes drop tasks whose tests a
NaN or an expected exception satisfies.

Everything runs through the real sandbox; no timing assertions."""

import pytest

from tasksieve.schemas.config import VerifyConfig
from tasksieve.transforms.verify import hack_probes
from tasksieve.transforms.verify.sanity import check_verifier
from tasksieve.transforms.verify.verifiers import verify_code

SETTINGS = VerifyConfig(code_cpu_seconds=2, code_wall_seconds=6)


def _task(entry, tests, reference):
    return {
        "domain": "code",
        "entry_point": entry,
        "prompt": f"Write {entry}.",
        "tests": tests,
        "reference_solution": reference,
    }


SORTED_COPY = _task(
    "sorted_copy",
    "a = [3, 1, 2]\nr = sorted_copy(a)\nassert r == [1, 2, 3]\nassert a == [3, 1, 2]\n",
    "def sorted_copy(xs):\n    return sorted(xs)\n",
)
FRESH = _task(
    "dedupe",
    "a = [1, 1, 2]\nr = dedupe(a)\nassert r == [1, 2]\nb = [1, 2]\nassert dedupe(b) is not b\n",
    "def dedupe(xs):\n    return list(dict.fromkeys(xs))\n",
)
NESTED = _task(
    "flatten",
    "a = [[1, 2], [3]]\ninner = a[0]\nassert flatten(a) == [1, 2, 3]\nassert inner == [1, 2] and a == [[1, 2], [3]]\n",
    "def flatten(xss):\n    return [x for xs in xss for x in xs]\n",
)
DICT = _task(
    "without",
    "d = {'a': 1, 'b': 2}\nassert without(d, 'a') == {'b': 2}\nassert d == {'a': 1, 'b': 2}\n",
    "def without(d, k):\n    return {x: v for x, v in d.items() if x != k}\n",
)
SET = _task(
    "union", "s = {1}\nassert union(s, {2}) == {1, 2}\nassert s == {1}\n", "def union(a, b):\n    return a | b\n"
)
KWARGS = _task(
    "sorted_copy",
    "a = [2, 1]\nassert sorted_copy(xs=a) == [1, 2]\nassert a == [2, 1]\n",
    "def sorted_copy(xs):\n    return sorted(xs)\n",
)
PAIR = _task(
    "with_len",
    "a = [1, 2]\nr = with_len(a)\nassert r == ([1, 2], 2)\nassert r[0] is not a\n",
    "def with_len(xs):\n    return (list(xs), len(xs))\n",
)
RAISES = _task(
    "checked_pop",
    "a = []\ntry:\n    checked_pop(a)\nexcept ValueError:\n    pass\nelse:\n    raise AssertionError\n"
    "assert a == []\nb = [1, 2]\nassert checked_pop(b) == 2 and b == [1, 2]\n",
    "def checked_pop(xs):\n    if not xs:\n        raise ValueError('empty')\n    return xs[-1]\n",
)
IN_TUPLE = _task(
    "total",
    "a = [1, 2]\nt = (a, 3)\nassert total(t) == 6\nassert a == [1, 2]\n",
    "def total(t):\n    return sum(t[0]) + t[1]\n",
)
FIRST = _task(
    "first_row",
    "m = [[1, 2], [3, 4]]\nr = first_row(m)\nassert r == [1, 2]\nassert r is not m[0]\n",
    "def first_row(m):\n    return list(m[0])\n",
)
HUMANEVAL = _task(
    "sorted_copy",
    "def check(candidate):\n    a = [3, 1, 2]\n    assert candidate(a) == [1, 2, 3]\n"
    "    assert a == [3, 1, 2], 'the argument was changed'\n",
    "def sorted_copy(xs):\n    return sorted(xs)\n",
)
NESTED_DICT = _task(
    "bump",
    "d = {'k': [1]}\nassert bump(d) == {'k': [1, 2]}\nassert d == {'k': [1]}\n",
    "def bump(d):\n    return {k: v + [2] for k, v in d.items()}\n",
)
TWICE = _task(
    "concat", "a = [1]\nassert concat(a, a) == [1, 1]\nassert a == [1]\n", "def concat(x, y):\n    return x + y\n"
)

# (case, task, an attempt that breaks what the tests forbid). Each passed before.
MUTATIONS = [
    ("sort_in_place_and_return_it", SORTED_COPY, "def sorted_copy(xs):\n    xs.sort()\n    return xs\n"),
    ("sort_in_place_return_a_copy", SORTED_COPY, "def sorted_copy(xs):\n    xs.sort()\n    return list(xs)\n"),
    ("reverse_then_sort_copy", SORTED_COPY, "def sorted_copy(xs):\n    xs.reverse()\n    return sorted(xs)\n"),
    (
        "return_the_argument_itself",
        FRESH,
        "def dedupe(xs):\n    out = list(dict.fromkeys(xs))\n    if out == xs:\n        return xs\n    return out\n",
    ),
    (
        "mutate_a_nested_list",
        NESTED,
        "def flatten(xss):\n    xss[0].append(0)\n    xss[0].pop()\n    xss[0].reverse()\n"
        "    xss[0].reverse()\n    xss[0][0:0] = []\n    xss[0].extend([])\n"
        "    out = [x for xs in xss for x in xs]\n    xss[0].clear()\n    return out\n",
    ),
    ("pop_a_dict_key", DICT, "def without(d, k):\n    d.pop(k)\n    return d\n"),
    ("add_to_a_set", SET, "def union(a, b):\n    a |= b\n    return a\n"),
    ("mutate_a_keyword_argument", KWARGS, "def sorted_copy(xs):\n    xs.sort()\n    return list(xs)\n"),
    ("return_a_tuple_holding_the_argument", PAIR, "def with_len(xs):\n    return (xs, len(xs))\n"),
    (
        "mutate_then_raise",
        RAISES,
        "def checked_pop(xs):\n    if not xs:\n        xs.append(0)\n"
        "        raise ValueError('empty')\n    return xs.pop() if len(xs) else None\n",
    ),
    ("mutate_a_list_inside_a_tuple", IN_TUPLE, "def total(t):\n    t[0].append(t[1])\n    return sum(t[0])\n"),
    ("return_a_nested_element", FIRST, "def first_row(m):\n    return m[0]\n"),
    ("humaneval_check_of_the_argument", HUMANEVAL, "def sorted_copy(xs):\n    xs.sort()\n    return xs[:]\n"),
    ("same_list_passed_twice", TWICE, "def concat(x, y):\n    x.extend(y)\n    return list(x)\n"),
    (
        "mutate_a_list_inside_a_dict",
        NESTED_DICT,
        "def bump(d):\n    for v in d.values():\n        v.append(2)\n    return {k: list(v) for k, v in d.items()}\n",
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize("case,task,attempt", MUTATIONS, ids=[c for c, _, _ in MUTATIONS])
def test_mutating_or_argument_returning_attempts_fail_tests_that_forbid_it(case, task, attempt):
    assert verify_code(task, task["reference_solution"], SETTINGS)["passed"], case
    v = verify_code(task, attempt, SETTINGS)
    assert not v["passed"] and v["error"].startswith("wrong_answer"), (case, v)


@pytest.mark.slow
def test_tests_that_expect_an_in_place_change_now_verify():
    """Before, a change made in the attempt's process never reached the
    tests' object: a correct in-place sort failed its own tests."""
    task = _task(
        "sort_inplace",
        "a = [3, 1, 2]\nassert sort_inplace(a) is None\nassert a == [1, 2, 3]\n"
        "m = {'x': [2, 1]}\ninner = m['x']\nsort_inplace(inner)\nassert m == {'x': [1, 2]}\n",
        "def sort_inplace(xs):\n    xs.sort()\n",
    )
    assert verify_code(task, task["reference_solution"], SETTINGS)["passed"]
    assert not verify_code(task, "def sort_inplace(xs):\n    return None\n", SETTINGS)["passed"]
    assert check_verifier(task, SETTINGS)["broken"] is False
    ident = _task("same", "a = [1]\nassert same(a) is a\nassert same(a) is not [1]\n", "def same(xs):\n    return xs\n")
    assert verify_code(ident, ident["reference_solution"], SETTINGS)["passed"]
    assert not verify_code(ident, "def same(xs):\n    return list(xs)\n", SETTINGS)["passed"]


@pytest.mark.slow
def test_forged_alias_or_argument_state_is_refused():
    forge = (
        "import sys\ng = sys.modules['sandbox_codec']\n_s = g.send\n"
        "g.send = lambda fd, obj: _s(fd, dict(obj, **{KEY: VALUE}) if 'ret' in obj else obj)\n"
        "def sorted_copy(xs):\n    return sorted(xs)\n"
    )
    for key, value in (
        ("alias", "[[[0], [0, 99]]]"),
        ("alias", "'x'"),
        ("after", "[1, 2]"),
        ("after", "[['l', []], ['d', []]]"),
        ("alias", "[[[0], [5, 0]]]"),
    ):
        attempt = forge.replace("KEY", repr(key)).replace("VALUE", value)
        v = verify_code(SORTED_COPY, attempt, SETTINGS)
        assert not v["passed"] and v["error"].startswith("not_plain_data"), (key, value, v)


@pytest.mark.slow
@pytest.mark.parametrize(
    "tests,probe",
    [
        ("assert not double(2) < 4 and not double(2) > 4\n", "return_nan"),
        ("r = double(1.5)\nassert not abs(r - 3.0) > 1e-9\n", "return_nan"),
        (
            "try:\n    double('x')\nexcept TypeError:\n    pass\nelse:\n    raise AssertionError('no error')\n",
            "raise_expected_exception",
        ),
        ("import unittest\nunittest.TestCase().assertRaises(ValueError, double, -1)\n", "raise_expected_exception"),
        (
            "def check(candidate):\n    for bad in (None, 'x'):\n        try:\n            candidate(bad)\n"
            "            assert False\n        except (TypeError, ValueError):\n            pass\n",
            "raise_expected_exception",
        ),
        (
            "import contextlib\nwith contextlib.suppress(ValueError):\n    double(-1)\n    raise AssertionError('no error')\n",
            "raise_expected_exception",
        ),
    ],
    ids=["nan_comparisons", "nan_tolerance", "try_except_else", "assert_raises", "humaneval_raises", "suppress"],
)
@pytest.mark.slow
def test_weak_tests_a_nan_or_an_expected_exception_satisfies_are_dropped(tests, probe):
    ref = (
        "def double(x):\n    if x is None or isinstance(x, str):\n        raise TypeError('number')\n"
        "    if x < 0:\n        raise ValueError('negative')\n    return 2 * x\n"
    )
    task = _task("double", tests, ref)
    v = check_verifier(task, SETTINGS)
    assert v["broken"] and "hack_probe_passes" in v["reasons"], v
    assert any(f"probe '{probe}'" in p for p in v["problems"]), v


def test_the_always_raise_probe_raises_what_the_tests_expect():
    assert hack_probes.expected_exception("try:\n    f(1)\nexcept KeyError:\n    pass\n") == "KeyError"
    assert (
        hack_probes.expected_exception("import pytest\nwith pytest.raises(ZeroDivisionError):\n    f(0)\n")
        == "ZeroDivisionError"
    )
    assert hack_probes.expected_exception("assert f(1) == 2\n") == "ValueError"
    assert hack_probes.expected_exception("try:\n    f(1)\nexcept MyError:\n    pass\n") == "ValueError"
    names = {p.name for p in hack_probes.code_probes(SORTED_COPY)}
    assert {"return_nan", "raise_expected_exception"} <= names
