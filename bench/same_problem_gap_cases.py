"""The generated cases of bench/same_problem_gaps.py (issue 43's four
gaps): variants and their sibling controls, shared setups, reworded GSM8K
items and their look-alike controls, added sentences. Each generator takes
a random.Random and a count; nothing here is tuned to the issue's examples."""

from __future__ import annotations

import re

from tasksieve.transforms.decontam.benchmarks import ITEMS

NAMES = [
    "Amelia",
    "Bongani",
    "Carlos",
    "Dagny",
    "Emeka",
    "Farida",
    "Giulia",
    "Haruto",
    "Ingrid",
    "Jamal",
    "Kavya",
    "Liang",
    "Mateo",
    "Nadia",
    "Olumide",
    "Paulina",
    "Quentin",
    "Rashida",
    "Sven",
    "Tamar",
    "Ulrich",
    "Valentina",
    "Wanjiru",
    "Ximena",
    "Yusuf",
    "Zofia",
    "Anouk",
    "Bilal",
    "Chiara",
    "Dmitri",
]
OBJECT_PAIRS = [
    ("apples", "plums"),
    ("eggs", "walnuts"),
    ("cookies", "muffins"),
    ("books", "magazines"),
    ("pencils", "markers"),
    ("cars", "vans"),
    ("dogs", "ferrets"),
    ("flowers", "seedlings"),
    ("shirts", "scarves"),
    ("tickets", "passes"),
    ("candies", "lollipops"),
    ("cupcakes", "brownies"),
    ("marbles", "beads"),
    ("stickers", "badges"),
    ("oranges", "peaches"),
    ("chickens", "ducks"),
    ("cows", "sheep"),
    ("boxes", "bins"),
    ("bottles", "cans"),
    ("trees", "hedges"),
    ("toys", "games"),
    ("pies", "cakes"),
    ("students", "pupils"),
    ("cats", "hamsters"),
    ("balloons", "streamers"),
    ("bags", "sacks"),
    ("pages", "sheets"),
    ("shoes", "boots"),
    ("houses", "cabins"),
    ("plants", "shrubs"),
    ("glasses", "mugs"),
    ("cards", "coupons"),
    ("fish", "crabs"),
    ("pizzas", "calzones"),
    ("sandwiches", "wraps"),
]
_WORDS = [
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
    "twenty",
]
_NUMWORD = re.compile(r"\b(" + "|".join(_WORDS) + r")\b", re.IGNORECASE)
_NUM = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.]*\d)")
_SENT = re.compile(r"(?<=[.?!])\s+")


def _gsm8k():
    return [i for i in ITEMS["gsm8k"]() if not i["id"].endswith("/answer")]


# --- templates: (text with {n} names and {a}.. numbers, answer function, number ranges) ----------

TEMPLATES = [
    (
        "{n} buys {a} notebooks at ${b} each and {c} pens at $2 each. How much does {n} spend in all?",
        lambda a, b, c: a * b + 2 * c,
    ),
    (
        "A tank holds {a} liters. {n} drains {b} liters every hour for {c} hours. How many liters are left?",
        lambda a, b, c: a - b * c,
    ),
    (
        "{n} reads {a} pages on Monday, {b} pages on Tuesday and twice as many on Wednesday as on Tuesday. "
        "The book has {c} pages more than she has read. How many pages does the book have?",
        lambda a, b, c: a + 3 * b + c,
    ),
    (
        "A farm has {a} cows and {b} goats. Each cow gives {c} liters of milk a day. How many liters of milk do "
        "the cows give in a week?",
        lambda a, b, c: 7 * a * c,
    ),
    (
        "{n} walks {a} km to school, then {b} km to the library, then {c} km home. How far does {n} walk?",
        lambda a, b, c: a + b + c,
    ),
    (
        "A bakery makes {a} trays of rolls with {b} rolls on each tray and sells all but {c} rolls. How many rolls "
        "are sold?",
        lambda a, b, c: a * b - c,
    ),
    (
        "{n} saves ${a} a week for {b} weeks and then spends ${c} on a jacket. How much money is left?",
        lambda a, b, c: a * b - c,
    ),
    (
        "In a class of {a} students, {b} play chess and {c} of the chess players also play go. How many students "
        "play chess but not go?",
        lambda a, b, c: b - c,
    ),
    (
        "{n} tiene {a} canicas y compra {b} bolsas con {c} canicas cada una. ¿Cuántas canicas tiene ahora?",
        lambda a, b, c: a + b * c,
    ),
    (
        "{n} a {a} euros. Il achète {b} cahiers à {c} euros chacun. Combien d'euros lui reste-t-il ?",
        lambda a, b, c: a - b * c,
    ),
    (
        "{n} hat {a} Äpfel und verschenkt {b} davon. Dann pflückt {n} {c} weitere Äpfel. Wie viele Äpfel hat {n} "
        "jetzt?",
        lambda a, b, c: a - b + c,
    ),
    (
        "A rectangle is {a} cm long and {b} cm wide. A square of side {c} cm is cut from it. What area is left, "
        "in square centimeters?",
        lambda a, b, c: a * b - c * c,
    ),
    (
        "A train leaves at {a} km/h and travels for {b} hours, then stops for {c} minutes. How many kilometers "
        "does it travel?",
        lambda a, b, c: a * b,
    ),
    (
        "{n} plants {a} rows of tulips with {b} tulips in each row. Rabbits eat {c} tulips. How many tulips are left?",
        lambda a, b, c: a * b - c,
    ),
]


def _fill(tpl, rng, name=None, nums=None):
    text, fn = tpl
    a, b, c = nums or (rng.randint(12, 90), rng.randint(2, 9), rng.randint(2, 11))
    name = name or rng.choice(NAMES)
    return text.format(n=name, a=a, b=b, c=c), fn(a, b, c), (a, b, c), name


def _edit_number(prompt: str, rng) -> str | None:
    nums = list(_NUM.finditer(prompt))
    if len(nums) < 2:
        return None
    m = rng.choice(nums)
    old = m.group()
    new = str(int(float(old)) + rng.choice([-3, -2, -1, 1, 2, 3, 5, 10])) if "." not in old else old + "5"
    if new == old or new.startswith("-") or new == "0":
        return None
    return prompt[: m.start()] + new + prompt[m.end() :]


def variants(rng, n):
    """(a, b, kind) pairs: one quantity edited (must be caught)."""
    out, items = [], [i for i in _gsm8k() if len(_NUM.findall(i["text"])) >= 3]
    while len(out) < n:
        if rng.random() < 0.5:
            it = rng.choice(items)
            edited = _edit_number(it["text"], rng)
            if edited is None:
                continue
            ans = it["answer"]
            moved = str(int(float(ans)) + rng.choice([1, 2, 5, 7])) if re.fullmatch(r"-?\d+(\.\d+)?", ans) else ans
            out.append((it["text"], ans, edited, moved, "gsm8k"))
        else:
            tpl = rng.choice(TEMPLATES)
            text, ans, nums, name = _fill(tpl, rng)
            k = rng.randrange(3)
            nums2 = list(nums)
            nums2[k] += rng.choice([1, 2, 3, 4])
            text2, ans2, _, _ = _fill(tpl, rng, name, tuple(nums2))
            out.append((text, ans, text2, ans2, "template"))
    return out


def siblings(rng, n):
    """One template filled anew: other names, every number redrawn (both kept)."""
    out = []
    while len(out) < n:
        tpl = rng.choice(TEMPLATES)
        text, ans, nums, name = _fill(tpl, rng)
        text2, ans2, nums2, name2 = _fill(tpl, rng, rng.choice([x for x in NAMES if x != name]))
        if len(set(nums) & set(nums2)) == 0:
            out.append((text, ans, text2, ans2, "template"))
    return out


SETUPS = [  # (setup, [(question, answer)...])
    (
        "Let $x_1 = {a}$ and $x_{{n+1}} = x_n^2 - {b} x_n + {c}$ for $n \\geq 1$.",
        [
            ("Could $x_p = x_q$ for some $p \\neq q$?", "No"),
            ("Must $x_n \\neq 0$ for every $n$?", "Yes"),
            ("Is the sequence eventually periodic?", "No"),
            ("Find the set of residues of $x_n$ modulo 2.", "{{0, 1}}"),
        ],
    ),
    (
        "In triangle $ABC$, $AB = {a}$, $BC = {b}$ and $CA = {c}$. The point $D$ lies on $BC$ with $AD$ bisecting "
        "angle $A$.",
        [
            ("Is triangle $ABC$ obtuse?", "Yes"),
            ("Which vertex has the largest angle?", "Vertex A"),
            ("Is $D$ the midpoint of $BC$?", "No"),
            ("Which side is the shortest?", "Side CA"),
        ],
    ),
    (
        "{n} and {m} share {a} stamps. {n} has {b} more stamps than {m}, and each of them gives {c} stamps to a "
        "friend named Oskar.",
        [
            ("Who has more stamps at the end?", "{n}"),
            ("Does Oskar get more than 5 stamps?", "Yes"),
            ("Who gives stamps to Oskar?", "{n} and {m}"),
            ("Does {m} end with no stamps?", "No"),
        ],
    ),
    (
        "A bag holds {a} red, {b} blue and {c} green marbles. Two marbles are drawn without replacement.",
        [
            ("Is it more likely that both are red than that both are blue?", "Yes"),
            ("Which colour is the least likely to be drawn first?", "Green"),
            ("Which colours can be drawn twice?", "red, blue, green"),
            ("Can both marbles be green?", "Yes"),
        ],
    ),
]


def shared_setups(rng, n):
    """(a, b) with one setup and two questions (both kept)."""
    out, items = [], [i for i in _gsm8k() if len(_SENT.split(i["text"].strip())) >= 3]
    while len(out) < n:
        r = rng.random()
        if r < 0.45:  # a GSM8K setup, its own question and another item's
            it, other = rng.sample(items, 2)
            sents = _SENT.split(it["text"].strip())
            q2 = _SENT.split(other["text"].strip())[-1]
            if not q2.endswith("?"):
                continue
            ans2 = str(int(float(it["answer"])) + rng.randint(1, 9)) if re.fullmatch(r"\d+", it["answer"]) else "7"
            setup = " ".join(sents[:-1])
            with_answers = r < 0.35
            out.append(
                (
                    it["text"],
                    it["answer"] if with_answers else None,
                    setup + " " + q2,
                    ans2 if with_answers else None,
                    "gsm8k" if with_answers else "gsm8k_no_answer",
                )
            )
        else:
            setup, qs = rng.choice(SETUPS)
            a, b, c = rng.randint(5, 40), rng.randint(2, 9), rng.randint(1, 9)
            nm, mm = rng.sample(NAMES, 2)
            s = setup.format(a=a, b=b, c=c, n=nm, m=mm)
            (q1, a1), (q2, a2) = rng.sample(qs, 2)
            a1, a2 = a1.format(n=nm, m=mm), a2.format(n=nm, m=mm)
            if a1 == a2:
                continue
            out.append((s + " " + q1.format(n=nm, m=mm), a1, s + " " + q2.format(n=nm, m=mm), a2, "competition"))
    return out


def _swap(text, rng):
    """Names and objects swapped; numbers kept."""
    names = {
        w
        for w in re.findall(r"\b[A-Z][a-z]{2,}\b", text)
        if w
        not in {
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
            "After",
            "When",
            "Then",
            "For",
            "This",
            "That",
            "A",
            "An",
            "Monday",
            "Tuesday",
            "Wednesday",
            "Thursday",
            "Friday",
            "Saturday",
            "Sunday",
            "But",
            "And",
            "She's",
            "He's",
            "Some",
            "All",
            "Half",
            "Her",
            "Their",
            "Its",
            "Today",
            "Tomorrow",
            "Yesterday",
        }
        and w.lower() not in _WORDS
    }
    pool = [x for x in NAMES if x not in names]
    rng.shuffle(pool)
    for old, new in zip(sorted(names), pool):
        text = re.sub(rf"\b{old}\b", new, text)
    swapped = len(names)
    for old, new in OBJECT_PAIRS:
        if old != new and re.search(rf"\b{old}\b", text):
            text = re.sub(rf"\b{old}\b", new, text)
            if old.endswith("s") and new.endswith("s"):
                text = re.sub(rf"\b{old[:-1]}\b", new[:-1], text)
            swapped += 1
    return text, swapped


def reworded_items(rng, n):
    """(task, item id, kind): names and objects swapped (caught), and the
    same with the numbers redrawn (clean)."""
    items = [i for i in _gsm8k() if re.fullmatch(r"\d+", i["answer"] or "")]
    rng.shuffle(items)
    caught, clean = [], []
    for it in items:
        text, swapped = _swap(it["text"], rng)
        if swapped < 2 or text == it["text"]:
            continue
        if len(caught) < n:
            caught.append((text, it["answer"], it["id"]))
        elif len(clean) < n:
            redrawn = _NUM.sub(lambda m: str(int(float(m.group())) + rng.randint(3, 40)), text)
            redrawn = _NUMWORD.sub(lambda m: str(_WORDS.index(m.group().lower()) + 1 + rng.randint(3, 40)), redrawn)
            clean.append((redrawn, str(int(it["answer"]) + rng.randint(1, 50)), it["id"]))
        else:
            break
    return caught, clean


FILLERS = [
    "This problem comes from last year's school contest.",
    "Give your answer as a whole number.",
    "Show your work clearly.",
    "Assume nothing else changes during this time.",
    "The weather that day was sunny and warm.",
    "Round your final answer if needed.",
    "Her neighbour, who lives 3 houses away, has 2 cats.",
    "It was a Tuesday in early spring.",
    "Ignore any taxes or fees.",
    "He had been planning this for 6 weeks.",
    "Nobody else helps with the work.",
    "Use only the information given above.",
    "Esta pregunta es parte de un examen.",
    "Le marché ouvre à 8 heures.",
    "Die Aufgabe ist nicht schwer.",
    "Everything costs the same as last year.",
    "The shop is closed on Sundays and opens at 9 in the morning.",
    "All amounts are in US dollars.",
]


def added_sentences(rng, n):
    """(a, answer, b, where): b is a with one sentence added (caught)."""
    out, items = [], [i for i in _gsm8k() if len(_SENT.split(i["text"].strip())) >= 2]
    while len(out) < n:
        if rng.random() < 0.6:
            it = rng.choice(items)
            text, ans = it["text"].strip(), it["answer"]
        else:
            text, ans, _, _ = _fill(rng.choice(TEMPLATES), rng)
        sents = _SENT.split(text)
        add = rng.choice(FILLERS)
        where = rng.choice(["start", "middle", "end"])
        at = {"start": 0, "middle": max(1, len(sents) // 2), "end": len(sents)}[where]
        out.append((text, ans, " ".join(sents[:at] + [add] + sents[at:]), where))
    return out
