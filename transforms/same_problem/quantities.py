"""The quantities of a problem: the multiset of numbers it states, however
they are written. Beam-free, no dependencies beyond the standard library.

A reworded problem keeps its quantities; a look-alike that reuses the words
with a new question and new numbers does not. So the same-problem rules
(`same_problem.py`) compare these multisets, not the words.

What is normalised, so that two writings of one quantity compare equal:
- digits with thousands separators and decimals: `1,200`, `1200`, `1200.0`;
- number words in English (and the common ones in Spanish, French and
  German, for translated items): `sixteen`, `twenty-five`, `one hundred and
  twenty`, `dieciséis`, `vingt-cinq`; multipliers (`twice` = 2, `half` =
  1/2, `a dozen` = 12, `3 dozen` = 36);
- fractions: `3/4`, `\\frac{3}{4}`, `\\dfrac34`, `three quarters`;
  percentages (`50%`, `50 percent`, `50 \\%`);
- LaTeX wrappers around numbers (`$17$`, `{17}`, `17_{b}`), `\\cdot`;
- simple units: a number followed by a time, length, mass or volume unit is
  converted to a base unit (`2 hours` = `120 minutes`; `1.5 km` = `1500 m`;
  `$3` = `3 dollars`; `45 cents` = `$0.45`), so a paraphrase that writes the
  unit differently keeps its quantities.
Values are kept as canonical strings of exact fractions (`0.75` and `3/4`
both become `3/4`), so multisets compare without float noise.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from functools import lru_cache
from fractions import Fraction

_UNITS_SMALL = {
    # English
    "zero": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
    # Spanish
    "uno": 1,
    "una": 1,
    "dos": 2,
    "tres": 3,
    "cuatro": 4,
    "cinco": 5,
    "seis": 6,
    "siete": 7,
    "ocho": 8,
    "nueve": 9,
    "diez": 10,
    "once": 11,
    "doce": 12,
    "trece": 13,
    "catorce": 14,
    "quince": 15,
    "dieciseis": 16,
    "diecisiete": 17,
    "dieciocho": 18,
    "diecinueve": 19,
    "veinte": 20,
    # French ("un"/"une" are also articles: left out)
    "deux": 2,
    "trois": 3,
    "quatre": 4,
    "cinq": 5,
    "sept": 7,
    "huit": 8,
    "neuf": 9,
    "dix": 10,
    "onze": 11,
    "douze": 12,
    "treize": 13,
    "quatorze": 14,
    "quinze": 15,
    "seize": 16,
    # German ("ein"/"eine" are also articles: left out)
    "eins": 1,
    "zwei": 2,
    "drei": 3,
    "vier": 4,
    "funf": 5,
    "sechs": 6,
    "sieben": 7,
    "acht": 8,
    "neun": 9,
    "zehn": 10,
    "elf": 11,
    "zwolf": 12,
    "dreizehn": 13,
    "vierzehn": 14,
    "funfzehn": 15,
    "sechzehn": 16,
    "siebzehn": 17,
    "achtzehn": 18,
    "neunzehn": 19,
    "zwanzig": 20,
}
_TENS = {
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
    "treinta": 30,
    "cuarenta": 40,
    "cincuenta": 50,
    "sesenta": 60,
    "setenta": 70,
    "ochenta": 80,
    "noventa": 90,
    "vingt": 20,
    "trente": 30,
    "quarante": 40,
    "cinquante": 50,
    "soixante": 60,
    "dreissig": 30,
    "vierzig": 40,
    "funfzig": 50,
    "sechzig": 60,
    "siebzig": 70,
    "achtzig": 80,
    "neunzig": 90,
}
_SCALES = {
    "hundred": 100,
    "thousand": 1000,
    "million": 10**6,
    "billion": 10**9,
    "cien": 100,
    "ciento": 100,
    "cientos": 100,
    "mil": 1000,
    "cent": 100,
    "cents_fr": 100,
    "mille": 1000,
    "hundert": 100,
    "tausend": 1000,
}
_MULTIPLIERS = {
    "twice": 2,
    "double": 2,
    "doubled": 2,
    "triple": 3,
    "tripled": 3,
    "thrice": 3,
    "quadruple": 4,
    "half": Fraction(1, 2),
    "halves": Fraction(1, 2),
    "quarter": Fraction(1, 4),
    "dozen": 12,
    "dozens": 12,
    "doble": 2,
    "mitad": Fraction(1, 2),
    "medio": Fraction(1, 2),
    "media": Fraction(1, 2),
    "docena": 12,
    "moitie": Fraction(1, 2),
    "demi": Fraction(1, 2),
    "demie": Fraction(1, 2),
    "douzaine": 12,
    "doppelt": 2,
    "halb": Fraction(1, 2),
    "halbe": Fraction(1, 2),
    "hälfte": Fraction(1, 2),
    "halfte": Fraction(1, 2),
    "dutzend": 12,
}
# "three quarters", "two thirds", "five eighths": a number word then an ordinal denominator.
_DENOMS = {
    "half": 2,
    "halves": 2,
    "third": 3,
    "thirds": 3,
    "quarter": 4,
    "quarters": 4,
    "fourth": 4,
    "fourths": 4,
    "fifth": 5,
    "fifths": 5,
    "sixth": 6,
    "sixths": 6,
    "seventh": 7,
    "sevenths": 7,
    "eighth": 8,
    "eighths": 8,
    "ninth": 9,
    "ninths": 9,
    "tenth": 10,
    "tenths": 10,
}
_CONNECT = {"and", "y", "et", "und", "-"}

# Units -> (dimension, factor to the base unit). Money in dollars, time in
# minutes, length in metres, mass in grams, volume in litres.
_UNIT_FACTORS = {
    "second": ("t", Fraction(1, 60)),
    "seconds": ("t", Fraction(1, 60)),
    "sec": ("t", Fraction(1, 60)),
    "secs": ("t", Fraction(1, 60)),
    "minute": ("t", 1),
    "minutes": ("t", 1),
    "min": ("t", 1),
    "mins": ("t", 1),
    "hour": ("t", 60),
    "hours": ("t", 60),
    "hr": ("t", 60),
    "hrs": ("t", 60),
    "day": ("t", 1440),
    "days": ("t", 1440),
    "week": ("t", 10080),
    "weeks": ("t", 10080),
    "millimeter": ("l", Fraction(1, 1000)),
    "millimeters": ("l", Fraction(1, 1000)),
    "mm": ("l", Fraction(1, 1000)),
    "millimetre": ("l", Fraction(1, 1000)),
    "millimetres": ("l", Fraction(1, 1000)),
    "centimeter": ("l", Fraction(1, 100)),
    "centimeters": ("l", Fraction(1, 100)),
    "cm": ("l", Fraction(1, 100)),
    "centimetre": ("l", Fraction(1, 100)),
    "centimetres": ("l", Fraction(1, 100)),
    "meter": ("l", 1),
    "meters": ("l", 1),
    "metre": ("l", 1),
    "metres": ("l", 1),
    "kilometer": ("l", 1000),
    "kilometers": ("l", 1000),
    "km": ("l", 1000),
    "kilometre": ("l", 1000),
    "kilometres": ("l", 1000),
    "mile": ("l", Fraction(1609344, 1000)),
    "miles": ("l", Fraction(1609344, 1000)),
    "foot": ("l", Fraction(3048, 10000)),
    "feet": ("l", Fraction(3048, 10000)),
    "ft": ("l", Fraction(3048, 10000)),
    "inch": ("l", Fraction(254, 10000)),
    "inches": ("l", Fraction(254, 10000)),
    "yard": ("l", Fraction(9144, 10000)),
    "yards": ("l", Fraction(9144, 10000)),
    "pound": ("m", Fraction(45359237, 100000)),
    "pounds": ("m", Fraction(45359237, 100000)),
    "lb": ("m", Fraction(45359237, 100000)),
    "lbs": ("m", Fraction(45359237, 100000)),
    "ounce": ("m", Fraction(28349523125, 10**9)),
    "ounces": ("m", Fraction(28349523125, 10**9)),
    "oz": ("m", Fraction(28349523125, 10**9)),
    "gallon": ("v", Fraction(3785411784, 10**9)),
    "gallons": ("v", Fraction(3785411784, 10**9)),
    "gram": ("m", 1),
    "grams": ("m", 1),
    "kilogram": ("m", 1000),
    "kilograms": ("m", 1000),
    "kg": ("m", 1000),
    "kilo": ("m", 1000),
    "kilos": ("m", 1000),
    "milliliter": ("v", Fraction(1, 1000)),
    "milliliters": ("v", Fraction(1, 1000)),
    "ml": ("v", Fraction(1, 1000)),
    "millilitre": ("v", Fraction(1, 1000)),
    "millilitres": ("v", Fraction(1, 1000)),
    "liter": ("v", 1),
    "liters": ("v", 1),
    "litre": ("v", 1),
    "litres": ("v", 1),
    "dollar": ("$", 1),
    "dollars": ("$", 1),
    "usd": ("$", 1),
    "bucks": ("$", 1),
    "cent": ("$", Fraction(1, 100)),
    "cents": ("$", Fraction(1, 100)),
    "percent": ("%", 1),
    "per cent": ("%", 1),
    "percentage": ("%", 1),
    "%": ("%", 1),
    "por ciento": ("%", 1),
    "pour cent": ("%", 1),
    "prozent": ("%", 1),
}

_LATEX_FRAC = re.compile(r"\\[dt]?frac\s*\{\s*(-?\d+(?:\.\d+)?)\s*\}\s*\{\s*(-?\d+(?:\.\d+)?)\s*\}")
_LATEX_FRAC_SHORT = re.compile(r"\\[dt]?frac\s*(\d)(\d)")
_LATEX_CMD = re.compile(r"\\(?:left|right|cdot|times|,|;|!|quad|qquad|text|mathrm|mathbf|operatorname)")
_TOKEN = re.compile(r"\d+(?:,\d{3})+(?:\.\d+)?|\d*\.\d+|\d+(?:/\d+)?|[^\W\d_]+|%|\$|-")
# _TOKEN for ASCII text, which most prompts are, in 60% of its time: on
# ASCII, \d is [0-9] and [^\W\d_] is [A-Za-z]; letters and the three signs
# cannot start a number, so trying them first changes no match; the three
# number forms share their leading digits, tried once. The same tokens
# (tests/dedup/test_same_problem.py compares both on every ASCII string it makes).
fast = True  # false: _TOKEN and the plain steps only (the tests compare both)
_TOKEN_ASCII = re.compile(r"[A-Za-z]+|[0-9]+(?:(?:,[0-9]{3})+(?:\.[0-9]+)?|\.[0-9]+|/[0-9]+)?|\.[0-9]+|[%$-]")


# The words a quantity can start with (_word_number, _MULTIPLIERS): any
# other word is skipped at once, as the full loop would skip it.
_STARTS = frozenset(_UNITS_SMALL) | frozenset(_TENS) | frozenset(_MULTIPLIERS)
# The tokens after a number that change it (a fraction, a dozen, a unit,
# or the first word of a two-word unit): after any other token a plain
# integer is its own canonical string.
_DOZEN = frozenset({"dozen", "dozens", "docenas", "douzaines", "dutzend"})  # "3 dozen": a multiplier after a number
_CHANGES_NEXT = (
    frozenset(_DENOMS) | _DOZEN | frozenset(_UNIT_FACTORS) | frozenset(u.split()[0] for u in _UNIT_FACTORS if " " in u)
)


def _fold(text: str) -> str:
    """NFKC, lower case, accents stripped (so `fünf` and `funf`, `dieciséis`
    and `dieciseis` are one word), LaTeX fractions to `a/b`."""
    t = unicodedata.normalize("NFKC", text)
    t = _LATEX_FRAC.sub(lambda m: f" {m.group(1)}/{m.group(2)} ", t)
    t = _LATEX_FRAC_SHORT.sub(lambda m: f" {m.group(1)}/{m.group(2)} ", t)
    t = _LATEX_CMD.sub(" ", t)
    t = t.replace("\\%", "%")
    t = t.lower()
    if t.isascii():  # no accents to strip (and NFKD leaves ASCII as it is)
        return t
    t = "".join(c for c in unicodedata.normalize("NFKD", t) if not unicodedata.combining(c))
    return t.replace("ß", "ss")


_LONG = 100  # a number token longer than this is compared as written, never parsed
_WORDS = 64  # words one number may take ("nine hundred ninety-nine thousand ..." needs ~20)
_BIG_BITS = 1000  # a value wider than this is written in hex: str() fails past 4,300 digits


def _num(tok: str) -> Fraction | None:
    if len(tok) > _LONG:  # see _quantities
        return None
    if tok.isdecimal():  # the common case, without Fraction's string parser
        return Fraction(int(tok))
    # isdecimal, not isdigit: "⓺" is a digit but no number a parser reads,
    # and a word token may start with it.
    if tok[0].isdecimal() or tok[0] == ".":
        if "/" in tok:
            a, b = tok.split("/")
            return Fraction(int(a), int(b)) if int(b) else None
        return Fraction(tok.replace(",", ""))
    return None


def _canon(v: Fraction) -> str:
    n, d = v.numerator, v.denominator
    if max(n.bit_length(), d.bit_length()) > _BIG_BITS:  # "hundred hundred hundred ...": a row may say anything
        return f"{n:#x}" if d == 1 else f"{n:#x}/{d:#x}"
    return str(n) if d == 1 else f"{n}/{d}"


def _word_number(toks: list[str], i: int) -> tuple[Fraction | None, int]:
    """A number written in words starting at toks[i]: (value, tokens used)."""
    if toks[i] not in _UNITS_SMALL and toks[i] not in _TENS:
        return None, 0  # what the loop below finds for such a first word, sooner
    total, current, j, seen = 0, 0, i, False
    while j < len(toks) and j - i < _WORDS:
        w = toks[j]
        if w in _UNITS_SMALL:
            current += _UNITS_SMALL[w]
        elif w in _TENS:
            current += _TENS[w]
        elif w in _SCALES and seen:
            scale = _SCALES[w]
            if scale >= 1000:
                total += max(current, 1) * scale
                current = 0
            else:
                current = max(current, 1) * scale
        elif w in _CONNECT and seen and j + 1 < len(toks) and (toks[j + 1] in _UNITS_SMALL or toks[j + 1] in _TENS):
            j += 1
            continue
        else:
            break
        seen = True
        j += 1
    if not seen:
        return None, 0
    return Fraction(total + current), j - i


def quantities(text: str) -> Counter:
    """Multiset of the canonical quantities in `text` (see the module doc)."""
    return Counter(dict(_quantities(text or "")))


def same_quantities(a: str, b: str) -> bool:
    """quantities(a) == quantities(b), without making either Counter: a
    dict compare in C, where Counter's == is a Python loop over both (near
    dedup asks this of every close candidate: ~85,000 at 1M tasks). Equal
    as multisets iff equal as dicts, since no count is ever zero."""
    return dict(_quantities(a or "")) == dict(_quantities(b or ""))


@lru_cache(maxsize=1 << 16)
def _quantities(text: str) -> tuple:
    # Memoised: near dedup asks for the same task's quantities once per
    # candidate pair it is in (a fresh Counter is built from the cache, so
    # no caller can change another's).
    folded = _fold(text or "")
    toks = (_TOKEN_ASCII if fast and folded.isascii() else _TOKEN).findall(folded)
    out: Counter = Counter()
    i = 0
    while i < len(toks):
        tok = toks[i]
        if tok.isalpha() and tok not in _STARTS:  # most words: nothing below would take them
            i += 1
            continue
        if len(tok) > _LONG and (tok[0].isdecimal() or tok[0] == "."):
            # int() refuses over 4,300 digits, and parsing is quadratic below that.
            out["#" + tok] += 1
            i += 1
            continue
        if fast and tok.isdecimal() and (i + 1 == len(toks) or toks[i + 1] not in _CHANGES_NEXT):
            # Most numbers: a plain integer nothing after it changes. What
            # the steps below make of it (_num, _canon), without a Fraction.
            out[str(int(tok))] += 1
            i += 1
            continue
        dollar = tok == "$"
        if dollar and i + 1 < len(toks) and _num(toks[i + 1]) is not None:
            i += 1
            tok = toks[i]
        value, used = _num(tok), 1
        if value is None:
            value, used = _word_number(toks, i)
            if value is None:
                if tok in _MULTIPLIERS and not (i > 0 and toks[i - 1] in _DENOMS):
                    out[_canon(Fraction(_MULTIPLIERS[tok]))] += 1
                i += 1
                continue
        j = i + used
        nxt = toks[j] if j < len(toks) else ""
        # "three quarters", "2 thirds": a fraction.
        if nxt in _DENOMS and value >= 1 and value.denominator == 1:
            value, j = value / _DENOMS[nxt], j + 1
            nxt = toks[j] if j < len(toks) else ""
        # "3 dozen": a multiplier after a number.
        if nxt in _DOZEN:
            value, j = value * 12, j + 1
            nxt = toks[j] if j < len(toks) else ""
        # Units: "2 hours", "45 cents", "50 percent", "50 %", "3 dollars", "$3".
        two = f"{nxt} {toks[j + 1]}" if j + 1 < len(toks) else ""
        if two in _UNIT_FACTORS:
            _, f = _UNIT_FACTORS[two]
            value, j = value * f, j + 2
        elif nxt in _UNIT_FACTORS:
            _, f = _UNIT_FACTORS[nxt]
            value, j = value * f, j + 1
        out[_canon(value)] += 1
        i = j
    return tuple(out.items())


def containment(item: Counter, task: Counter) -> float:
    """Share of the item's quantities (multiset) that the task also states."""
    n = sum(item.values())
    return round(sum((item & task).values()) / n, 4) if n else 1.0


def jaccard(a: Counter, b: Counter) -> float:
    u = sum((a | b).values())
    return round(sum((a & b).values()) / u, 4) if u else 1.0


# Arithmetic operators written between numbers ("2 + 2", "(3 * 4)"): in a
# short prompt they are as much the problem as the numbers ("Calculate 2 + 2"
# and "Calculate 2 - 2" state the same quantities). Hyphens inside words
# ("3-year-old", "twenty-five") are not operators.
_OPERATOR = re.compile(r"(?<=[\d\s)])([-+*/×÷^=<>])(?=[\s\d(])")


def operators(text: str) -> Counter:
    return Counter(_OPERATOR.findall(unicodedata.normalize("NFKC", text or "")))
