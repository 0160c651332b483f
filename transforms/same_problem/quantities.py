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

from tasksieve.transforms.same_problem.quantity_words import (
    UNITS_SMALL as _UNITS_SMALL,
    TENS as _TENS,
    SCALES as _SCALES,
    MULTIPLIERS as _MULTIPLIERS,
    DENOMS as _DENOMS,
    CONNECT as _CONNECT,
    UNIT_FACTORS as _UNIT_FACTORS,
)

_LATEX_FRAC = re.compile(r"\\[dt]?frac\s*\{\s*(-?\d+(?:\.\d+)?)\s*\}\s*\{\s*(-?\d+(?:\.\d+)?)\s*\}")
_LATEX_FRAC_SHORT = re.compile(r"\\[dt]?frac\s*(\d)(\d)")
_LATEX_CMD = re.compile(r"\\(?:left|right|cdot|times|,|;|!|quad|qquad|text|mathrm|mathbf|operatorname)")
_TOKEN = re.compile(r"\d+(?:,\d{3})+(?:\.\d+)?|\d*\.\d+|\d+(?:/\d+)?|[^\W\d_]+|%|\$|-")
# _TOKEN for ASCII text, which most prompts are, in 60% of its time: on
# ASCII, \d is [0-9] and [^\W\d_] is [A-Za-z]; letters and the three signs
# cannot start a number, so trying them first changes no match; the three
# number forms share their leading digits, tried once. The same tokens
# (tests/dedup/test_same_problem.py compares both on every ASCII string it makes).
fast = True  # false: _TOKEN and _read, every token visited (the tests compare both)
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
        if _DOT_THOUSANDS.fullmatch(tok):  # "80.000": thousands (de, es, fr), never a decimal written so
            return Fraction(int(tok.replace(".", "")))
        return Fraction(tok.replace(",", ""))
    return None


_DOT_THOUSANDS = re.compile(r"[1-9]\d{0,2}(?:\.000)+")


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
    if not fast:
        return _read(_TOKEN.findall(folded))
    if folded.isascii():
        toks = _TOKEN_ASCII.findall(folded)
        return _read_fast(toks, [k for k, t in enumerate(toks) if t[0] in _LEADS_ASCII or t in _STARTS])
    toks = _TOKEN.findall(folded)
    return _read_fast(toks, [k for k, t in enumerate(toks) if t[0].isdecimal() or t[0] in "$." or t in _STARTS])


# What a token must start with, or be, for the loop to read anything at it
# (_step): a number (a decimal digit or "."), "$", or a word a quantity
# starts with. At any other token _step reads nothing and moves on by one,
# so _read_fast visits only these (a prompt's ~50 tokens hold ~6).
_LEADS_ASCII = frozenset("0123456789.$")


def _read(toks: list[str]) -> tuple:
    """The quantities in a text's tokens, every token visited: the plain
    steps, against which the tests check _read_fast."""
    out: dict = {}
    i = 0
    while i < len(toks):
        tok = toks[i]
        if tok.isalpha() and tok not in _STARTS:  # most words: _step would take nothing
            i += 1
            continue
        i = _step(toks, i, out)
    return tuple(out.items())


def _read_fast(toks: list[str], starts: list[int]) -> tuple:
    """_read, visiting only `starts` (the tokens _step can read anything
    at, in order) and skipping those an earlier quantity took; a plain
    integer nothing after it changes is read without a Fraction. The same
    multiset in the same order (tests/dedup/test_same_problem.py)."""
    out: dict = {}
    n, j = len(toks), 0
    for i in starts:
        if i < j:  # taken by the quantity before (its unit, its words)
            continue
        tok = toks[i]
        if tok.isdecimal() and len(tok) <= _LONG and (i + 1 == n or toks[i + 1] not in _CHANGES_NEXT):
            # Most numbers: what _num and _canon make of them, without a Fraction.
            key = str(int(tok))
            out[key] = out.get(key, 0) + 1
            j = i + 1
            continue
        j = _step(toks, i, out)
    return tuple(out.items())


def _step(toks: list[str], i: int, out: dict) -> int:
    """Reads the quantity starting at toks[i], if any, into `out` (counts):
    the index of the first token after it."""
    tok = toks[i]
    if len(tok) > _LONG and (tok[0].isdecimal() or tok[0] == "."):
        # int() refuses over 4,300 digits, and parsing is quadratic below that.
        _add(out, "#" + tok)
        return i + 1
    dollar = tok == "$"
    if dollar and i + 1 < len(toks) and _num(toks[i + 1]) is not None:
        i += 1
        tok = toks[i]
    value, used = _num(tok), 1
    if value is None:
        value, used = _word_number(toks, i)
        if value is None:
            if tok in _MULTIPLIERS and not (i > 0 and toks[i - 1] in _DENOMS):
                _add(out, _canon(Fraction(_MULTIPLIERS[tok])))
            return i + 1
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
    _add(out, _canon(value))
    return j


def _add(out: dict, key: str) -> None:
    out[key] = out.get(key, 0) + 1


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
# ("3-year-old", "twenty-five") are not operators. What
# `(?<=[\d\s)])([-+*/×÷^=<>])(?=[\s\d(])` finds, led by the operator and
# checked behind it, so `re` jumps to operator characters instead of trying
# the look-behind at every position: ~6x faster on the bench pool's
# prompts, and every task's quantity key asks it (tests/dedup/
# test_same_problem_relations.py compares both on random text).
_OPERATOR = re.compile(r"([-+*/×÷^=<>])(?<=[\d\s)][-+*/×÷^=<>])(?=[\s\d(])")


def operators(text: str) -> Counter:
    return Counter(_OPERATOR.findall(unicodedata.normalize("NFKC", text or "")))
