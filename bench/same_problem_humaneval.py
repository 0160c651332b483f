"""Clean HumanEval look-alikes (must be kept): new functions in HumanEval's
style, and HumanEval docstrings edited to ask for another behaviour."""

from __future__ import annotations

import random

from same_problem_base import bench_items, code_case


# New functions in HumanEval's style: (name, signature args, docstring line, solution body, example args)
PREDICATES = [
    (
        "all_divisible",
        "l: list, k: int",
        "Return True if all numbers in the list l are divisible by k.",
        "return all(x % k == 0 for x in l)",
        [([2, 4, 6], 2), ([3, 4], 3)],
    ),
    (
        "any_divisible",
        "l: list, k: int",
        "Return True if any number in the list l is divisible by k.",
        "return any(x % k == 0 for x in l)",
        [([5, 7, 9], 3), ([5, 7], 2)],
    ),
    (
        "all_above",
        "l: list, t: int",
        "Return True if all numbers in the list l are above threshold t.",
        "return all(x > t for x in l)",
        [([10, 20, 30], 5), ([1, 8], 4)],
    ),
    (
        "none_equal",
        "l: list, v: int",
        "Return True if no element of the list l is equal to v.",
        "return all(x != v for x in l)",
        [([1, 2, 3], 4), ([1, 2, 3], 2)],
    ),
    (
        "count_even_is",
        "l: list, k: int",
        "Return True if exactly k numbers in the list l are even.",
        "return sum(1 for x in l if x % 2 == 0) == k",
        [([1, 2, 4], 2), ([2, 3], 2)],
    ),
    (
        "sum_below",
        "l: list, t: int",
        "Return True if the sum of the numbers in the list l is below t.",
        "return sum(l) < t",
        [([1, 2, 3], 10), ([5, 6], 4)],
    ),
    (
        "has_negatives",
        "l: list, k: int",
        "Return True if at least k numbers in the list l are negative.",
        "return sum(1 for x in l if x < 0) >= k",
        [([-1, -2, 3], 2), ([1, -2], 2)],
    ),
    (
        "max_at_most",
        "l: list, t: int",
        "Return True if the largest number in the list l is at most t.",
        "return max(l) <= t",
        [([1, 5, 3], 5), ([9, 2], 4)],
    ),
    (
        "starts_with",
        "s: str, c: str",
        "Return True if the string s starts with the character c, ignoring case.",
        "return s[:1].lower() == c.lower()",
        [("Apple", "a"), ("pear", "e")],
    ),
    (
        "long_words",
        "s: str, k: int",
        "Return the number of words in the string s that are longer than k characters.",
        "return sum(1 for w in s.split() if len(w) > k)",
        [("the quick brown fox", 3), ("a bb ccc", 5)],
    ),
    (
        "is_sorted_desc",
        "l: list, strict: bool",
        "Return True if the list l is sorted in decreasing order.\n    If "
        "strict is True, equal neighbours are not allowed.",
        "return all((a > b) if strict else (a >= b) for a, b in zip(l, l[1:]))",
        [([3, 2, 1], True), ([3, 3, 1], True)],
    ),
    (
        "digit_sum_even",
        "n: int, k: int",
        "Return True if the sum of the digits of n is even and n is larger than k.",
        "return sum(int(d) for d in str(abs(n))) % 2 == 0 and n > k",
        [(123, 5), (111, 200)],
    ),
]

# HumanEval prompts edited to ask for another behaviour: (HumanEval id, [(old, new)], name, solution, tests)
EDITED_HUMANEVAL = [
    (
        "HumanEval/0",
        [
            ("closer to each other than", "farther from each other than"),
            ("has_close_elements", "has_far_elements"),
            ("[1.0, 2.0, 3.0], 0.5)\n    False", "[1.0, 2.0, 3.0], 5.0)\n    False"),
            ("[1.0, 2.8, 3.0, 4.0, 5.0, 2.0], 0.3)\n    True", "[1.0, 2.8, 3.0, 4.0, 5.0, 2.0], 3.5)\n    True"),
        ],
        "has_far_elements",
        "def has_far_elements(numbers, threshold):\n    return any(abs(a - b) > threshold for i, a in enumerate(numbers) "
        "for b in numbers[i + 1:])\n",
        "def check(candidate):\n    assert candidate([1.0, 2.0, 3.0], 5.0) is False\n    assert candidate([1.0, 9.0], 3.5) is True\n",
    ),
    (
        "HumanEval/52",
        [
            ("below threshold t", "above threshold t"),
            ("below_threshold", "above_threshold"),
            ("[1, 2, 4, 10], 100)\n    True", "[101, 200, 400], 100)\n    True"),
            ("[1, 20, 4, 10], 5)\n    False", "[1, 20, 4, 10], 5)\n    False"),
        ],
        "above_threshold",
        "def above_threshold(l, t):\n    return all(x > t for x in l)\n",
        "def check(candidate):\n    assert candidate([101, 200], 100)\n    assert not candidate([1, 20, 4, 10], 5)\n",
    ),
    (
        "HumanEval/23",
        [
            ("Return length of given string", "Return the number of vowels in the given string"),
            ("strlen", "count_vowels"),
            ("count_vowels('abc')\n    3", "count_vowels('abc')\n    1"),
        ],
        "count_vowels",
        "def count_vowels(string):\n    return sum(c in 'aeiouAEIOU' for c in string)\n",
        "def check(candidate):\n    assert candidate('') == 0\n    assert candidate('abc') == 1\n    assert candidate('aeiou') == 5\n",
    ),
    (
        "HumanEval/13",
        [
            (
                "Return a greatest common divisor of two integers a and b",
                "Return the least common multiple of two integers a and b",
            ),
            ("greatest_common_divisor", "least_common_multiple"),
            ("(3, 5)\n    1", "(3, 5)\n    15"),
            ("(25, 15)\n    5", "(25, 15)\n    75"),
        ],
        "least_common_multiple",
        "def least_common_multiple(a, b):\n    import math\n    return a * b // math.gcd(a, b)\n",
        "def check(candidate):\n    assert candidate(3, 5) == 15\n    assert candidate(25, 15) == 75\n",
    ),
    (
        "HumanEval/28",
        [
            (
                "Concatenate list of strings into a single string",
                "Join a list of strings into a single string, separated by commas",
            ),
            ("concatenate", "join_commas"),
            ("'abc'", "'a,b,c'"),
        ],
        "join_commas",
        "def join_commas(strings):\n    return ','.join(strings)\n",
        "def check(candidate):\n    assert candidate([]) == ''\n    assert candidate(['a', 'b', 'c']) == 'a,b,c'\n",
    ),
    (
        "HumanEval/34",
        [
            ("Return sorted unique elements in a list", "Return the unique elements of a list in decreasing order"),
            ("unique(", "unique_desc("),
            ("[0, 2, 3, 5, 9, 123]", "[123, 9, 5, 3, 2, 0]"),
        ],
        "unique_desc",
        "def unique_desc(l):\n    return sorted(set(l), reverse=True)\n",
        "def check(candidate):\n    assert candidate([5, 3, 5, 2, 3, 3, 9, 0, 123]) == [123, 9, 5, 3, 2, 0]\n",
    ),
    (
        "HumanEval/35",
        [
            ("Return maximum element in the list", "Return the minimum element in the list"),
            ("max_element", "min_element"),
            ("[1, 2, 3])\n    3", "[1, 2, 3])\n    1"),
            ("10])\n    123", "10])\n    -10"),
        ],
        "min_element",
        "def min_element(l):\n    return min(l)\n",
        "def check(candidate):\n    assert candidate([1, 2, 3]) == 1\n    assert candidate([5, 3, -5, 2, -3, 3, 9, 0, 124, 1, -10]) == -10\n",
    ),
    (
        "HumanEval/42",
        [
            ("Return list with elements incremented by 1", "Return list with elements decremented by 1"),
            ("incr_list", "decr_list"),
            ("[2, 3, 4]", "[0, 1, 2]"),
            ("[6, 4, 6, 3, 4, 4, 10, 1, 124]", "[4, 2, 4, 1, 2, 2, 8, -1, 122]"),
        ],
        "decr_list",
        "def decr_list(l):\n    return [x - 1 for x in l]\n",
        "def check(candidate):\n    assert candidate([]) == []\n    assert candidate([1, 2, 3]) == [0, 1, 2]\n",
    ),
    (
        "HumanEval/53",
        [
            ("Add two numbers x and y", "Multiply two numbers x and y"),
            ("def add", "def multiply"),
            ("add(2, 3)\n    5", "multiply(2, 3)\n    6"),
            ("add(5, 7)\n    12", "multiply(5, 7)\n    35"),
        ],
        "multiply",
        "def multiply(x, y):\n    return x * y\n",
        "def check(candidate):\n    assert candidate(2, 3) == 6\n    assert candidate(5, 7) == 35\n",
    ),
    (
        "HumanEval/45",
        [
            (
                "Given length of a side and high return area for a triangle",
                "Given length of a side and high return area for a rectangle",
            ),
            ("triangle_area", "rectangle_area"),
            ("(5, 3)\n    7.5", "(5, 3)\n    15"),
        ],
        "rectangle_area",
        "def rectangle_area(a, h):\n    return a * h\n",
        "def check(candidate):\n    assert candidate(5, 3) == 15\n    assert candidate(2, 2) == 4\n",
    ),
]


def _examples(name, body, args_list, arg_names):
    ns = {}
    exec(f"def {name}({arg_names}):\n    {body}\n", ns)
    fn = ns[name]
    lines = []
    for args in args_list:
        lines.append(f"    >>> {name}({', '.join(repr(a) for a in args)})\n    {fn(*args)!r}")
    return fn, "\n".join(lines)


def humaneval_style(rng: random.Random) -> list[dict]:
    out = []
    for i, (name, sig, doc, body, ex) in enumerate(PREDICATES):
        arg_names = ", ".join(a.split(":")[0].strip() for a in sig.split(","))
        fn, examples = _examples(name, body, ex, arg_names)
        prompt = f'\n\ndef {name}({sig}):\n    """{doc}\n{examples}\n    """\n'
        sol = f"def {name}({arg_names}):\n    {body}\n"
        tests = "def check(candidate):\n" + "".join(
            f"    assert candidate({', '.join(repr(a) for a in args)}) == {fn(*args)!r}\n" for args in ex
        )
        out.append(code_case(f"hestyle-{i}", prompt, sol, name, tests, "humaneval_docstring"))
        # The same function in another of HumanEval's habits: typed imports and a second example block.
        prompt2 = f'from typing import List\n\n\ndef {name}({sig}) -> bool:\n    """ {doc}\n{examples}\n    """\n'
        out.append(code_case(f"hestyle-{i}-b", prompt2, sol, name, tests, "humaneval_docstring"))
    he = {i["id"]: i for i in bench_items("humaneval")}
    for j, (hid, edits, name, sol, tests) in enumerate(EDITED_HUMANEVAL):
        prompt = he[hid]["text"]
        for old, new in edits:
            prompt = prompt.replace(old, new)
        out.append(code_case(f"heedit-{j}", prompt, sol, name, tests, "humaneval_docstring", edited_from=hid))
    return out
