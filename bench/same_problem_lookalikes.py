"""Clean look-alikes (must be kept): stock GSM8K phrases, AIME boilerplate,
other-year competition problems, a GSM8K item's opening scenario with new
numbers and a new question; the HumanEval-style ones are in
same_problem_humaneval.py."""

from __future__ import annotations

import random
from fractions import Fraction

from same_problem_base import NAMES, NUMBER, SENTENCE, bench_items, math_case
from same_problem_humaneval import humaneval_style


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
            out.append(math_case(f"stock-{t}-{f}", tpl.format(n=n, a=a, b=b), ans(a, b), "stock_phrase"))
    return out


def aime_boilerplate(rng: random.Random) -> list[dict]:
    out = []
    for t, (tpl, ans, ra, rb) in enumerate(AIME_STYLE):
        for f in range(6):
            a, b = rng.randint(*ra), rng.randint(*rb) if rb != (0, 0) else 0
            out.append(math_case(f"aimebp-{t}-{f}", tpl.format(a=a, b=b), ans(a, b), "aime_boilerplate"))
    return out


def other_year(rng: random.Random) -> list[dict]:
    out = [math_case(f"aime2024-{i}", q, a, "other_year") for i, (q, a) in enumerate(AIME_2024)]
    for t, (tpl, ans, ra, rb) in enumerate(COMPETITION):
        for f in range(3):
            a, b = rng.randint(*ra), rng.randint(*rb) if rb != (0, 0) else 0
            out.append(math_case(f"comp-{t}-{f}", tpl.format(a=a, b=b), ans(a, b), "other_year"))
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
    for item in bench_items("gsm8k"):
        sents = SENTENCE.split(item["text"].strip())
        opening = [s for s in sents[:-1]][:2]
        if len(opening) < 2 or len(NUMBER.findall(" ".join(opening))) < 2:
            continue
        nums = []

        def redraw(m):
            v = int(m.group())
            new = rng.choice([x for x in range(2, max(12, 3 * v)) if x != v])
            nums.append(new)
            return str(new)

        text = NUMBER.sub(redraw, " ".join(opening))
        tpl, ans = _SCENARIO_QUESTIONS[len(out) % len(_SCENARIO_QUESTIONS)]
        k = rng.randint(2, 9)
        out.append(
            math_case(
                f"scenario-{item['id']}", f"{text} {tpl.format(k=k)}", ans(nums, k), "scenario_reuse", reuses=item["id"]
            )
        )
        if len(out) >= n:
            break
    return out


def lookalikes(seed: int = 13) -> list[dict]:
    rng = random.Random(seed)
    return stock_phrase(rng) + aime_boilerplate(rng) + other_year(rng) + humaneval_style(rng) + scenario_reuse(rng)
