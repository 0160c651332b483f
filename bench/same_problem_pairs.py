"""Near dedup's hard pairs: one problem worded two ways (must drop one), and
two problems from one template (must keep both)."""

from __future__ import annotations

import random
from fractions import Fraction

from same_problem_base import math_case
from tasksieve.transforms.decontam.benchmarks import words


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
            x = math_case(f"pp-{f}-{kind}-{r}-a", _fill(fam["base"], who, a, b, c), ans, kind)
            y = math_case(f"pp-{f}-{kind}-{r}-b", _fill(fam[kind], who, a, b, c), ans, kind)
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
                    math_case(f"sib-{f}-{s}-a", _fill(tpl, w1, *v1), fam["ans"](*v1), "template_sibling"),
                    math_case(f"sib-{f}-{s}-b", _fill(tpl, w2, *v2), fam["ans"](*v2), "template_sibling"),
                )
            )
    return out


def shares_gsm8k_8gram(text: str, index) -> bool:
    return index.match(text) is not None and words(text) is not None
