"""Is an extracted final answer a value the verifier may compare at all?

math-verify compares values; it does not ask whether the text it was given
is an answer. Four ways an attempt gets a pass it did not earn, each refused
here before anything is parsed (math_answers.verify_math) and each a probe
of verifier_sanity (hack_probes.py):

- invisible characters: a zero-width space or a soft hyphen inside
  `\\boxed{6<ZWSP>5}` displays "65" but was read as 6. Any format, control,
  private-use or unassigned character, or a known blank filler (Hangul
  filler, braille blank, variation selectors, combining grapheme joiner),
  anywhere in an answer refuses it: nothing is silently joined or split.
- hedges: `\\boxed{5 \\text{ (or 6)}}` was read as 5. A text group holding a
  second value, or a hedge word ("or", "maybe", \\lor ...), refuses the
  answer unless the reference hedges the same way.
- percent: `\\boxed{6\\%}` was read as 6. A percent is read as a percent,
  in the reference too: "6\\%" == "6%" == "0.06" != "6" (percent_value).
- restating the question: `1234*5678`, `\\binom{10}{3}`, `10!` were
  evaluated and graded right. An answer that still holds a computation
  (kinds_of) is refused unless the reference holds that kind of
  operator itself, or a variable: then the task asks for an expression.
  Value forms stay allowed: integers, decimals, a reduced fraction 3/4, a
  surd \\sqrt{2}, pi, a sign, scientific notation 1.2 \\times 10^{5}, units.

Pure functions on short strings (answers are capped at 200 characters
before they get here): no regular expression below can backtrack badly.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from decimal import Decimal, InvalidOperation
from math import gcd, isqrt

# A reference is analysed on its first this many characters (a field may hold
# 100,000; an answer compared at all holds at most 200).
MAX_ANALYSED_CHARS = 2000
# Invisible but not of a format/control category.
_BLANK_FILLERS = {0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180B, 0x180C, 0x180D, 0x180F, 0x2800, 0x3164, 0xFFA0}
_INVISIBLE_CATEGORIES = ("Cf", "Co", "Cn", "Cc")


def _invisible(ch: str) -> bool:
    o = ord(ch)
    if ch in "\n\r\t":
        return False
    return (
        unicodedata.category(ch) in _INVISIBLE_CATEGORIES
        or o in _BLANK_FILLERS
        or 0xFE00 <= o <= 0xFE0F
        or 0xE0100 <= o <= 0xE01EF
    )


def has_invisible(text: str) -> bool:
    return any(_invisible(ch) for ch in text if not ch.isascii() or ch < " " or ch == "\x7f")


def mark_on_digit(text: str) -> bool:
    """A combining mark on a digit: `6\u0301` or a keycap `6\u20e3` is not the digit 6."""
    before = ""
    for ch in text:
        if not ch.isascii() and unicodedata.category(ch).startswith("M"):
            if before.isdigit():
                return True
            continue  # a mark on a mark on a digit is still on the digit
        before = ch
    return False


def invisible_near_digit(text: str) -> bool:
    """A run of invisible characters touching a digit, or a combining mark
    on one. One pass: a prompt echoed by a probe may hold 100,000 of them."""
    if mark_on_digit(text):
        return True
    before, run = "", False
    for ch in text:
        if (not ch.isascii() or ch < " " or ch == "\x7f") and _invisible(ch):
            if not run:
                run, run_before = True, before
            continue
        if run and (run_before.isdigit() or ch.isdigit()):
            return True
        run, before = False, ch
    return run and run_before.isdigit()


# --- text groups and hedges ----------------------------------------------------------------

_TEXT_CMD = re.compile(
    r"\\(?:text[a-z]*|mbox|hbox|fbox|mathrm|mathbf|mathit|mathsf|mathtt|mathnormal|operatorname\*?"
    r"|emph|textnormal)\s*\{"
)
_HEDGE_WORD = re.compile(
    r"(?<![a-z\\])(?:or|maybe|possibly|perhaps|either|alternatively|otherwise|else|probably|"
    r"unless|instead|nor|vs|versus|likely|guess)(?![a-z])",
    re.I,
)
_HEDGE_SYMBOL = re.compile(r"\\(?:lor|vee)(?![a-z])|\|\||∨")
_APPROX_WORD = re.compile(r"(?<![a-z\\])(?:approx\w*|about|roughly|around|nearly|circa)(?![a-z])|\\approx|≈", re.I)
_NUM = re.compile(r"\d+(?:\.\d+)?")


def _groups(text: str):
    """(start, end, inner) of each top-level text-like group `\\text{...}`."""
    out, pos = [], 0
    while True:
        m = _TEXT_CMD.search(text, pos)
        if not m:
            return out
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        out.append((m.start(), i, text[m.end() : i - 1] if depth == 0 else text[m.end() :]))
        pos = i


_FUNCTION_NAME = re.compile(
    r"\s*(?:C|P|binom|choose|gcd|lcm|mod|log|ln|exp|floor|ceil|max|min|abs|sgn|sum|prod|"
    r"fact|factorial|[a-z]*sin|[a-z]*cos|[a-z]*tan)\s*",
    re.I,
)


def _flatten_text(text: str, repl: str | None = None) -> str:
    """The answer with each text group replaced by its inner text (or by
    `repl`, except a group naming a function: `\\operatorname{lcm}`)."""
    parts, last = [], 0
    for start, end, inner in _groups(text):
        keep = repl is None or _FUNCTION_NAME.fullmatch(inner)
        parts += [text[last:start], f" {inner.strip() if keep and repl is not None else inner if keep else repl} "]
        last = end
    return "".join(parts + [text[last:]])


_RANGE = re.compile(r"\d\s*(?:[–—‒―‐‑﹣－]|--|\\text(?:en|em)dash(?![a-z])|\\(?:pm|mp)(?![a-z])|±|∓)\s*[-+−(]?\s*\d")
_SPACES = re.compile(r"(?:\\[,;:! ]|\\q?quad(?![a-z])|~|\s)*")


def _between_values(text: str, start: int, end: int) -> bool:
    """A text group with a value on each side: `5 \\text{(}6\\text{)}`, not a unit."""
    before = _SPACES.sub("", text[max(0, start - 64) : start])
    after = _SPACES.sub("", text[end : end + 64])
    return bool(before) and before[-1] in "0123456789)" and re.match(r"[-+−(\[]?\d", after) is not None


def is_hedge(answer: str) -> bool:
    """A second value in a text group or on its far side, a hedge word, a
    range (5–6, 5 \\pm 1) or a logical or."""
    groups = _groups(answer)
    if any(_between_values(answer, start, end) for start, end, _ in groups) or _RANGE.search(answer):
        return True
    outside = _flatten_text(answer, repl=" ")
    if any(_NUM.search(inner) for *_, inner in groups) and (
        _NUM.search(outside) or sum(bool(_NUM.search(g[2])) for g in groups) > 1
    ):
        return True
    flat = _flatten_text(answer)
    if _HEDGE_WORD.search(flat) or _HEDGE_SYMBOL.search(flat):
        return True
    return bool(_APPROX_WORD.search(flat)) and len(_NUM.findall(flat)) > 1


# --- percent -------------------------------------------------------------------------------

_PERCENT = re.compile(
    r"(?:\{\s*\\%\s*\}|\\%|%|％|﹪|\\percent(?![a-z])|"
    r"\\(?:text|mathrm|mbox)\s*\{\s*(?:\\%|%|per\s?cent)\s*\}|\bper\s?cent\b|\bpct\b"
    r"|(?P<mille>‰|\\permil(?![a-z])|\bper\s?mill?e\b)|(?P<myriad>‱|\bbasis points?\b|\bbps\b))",
    re.I,
)
_PLAIN_NUMBER = re.compile(r"[-+−]?\d[\d,]*(?:\.\d*)?|[-+−]?\.\d+")


def percent_value(text: str) -> str:
    """`text` with a percent read as hundredths: "6\\%" -> "0.06", "12.5 percent"
    -> "0.125", "\\frac{1}{3}\\%" -> "\\frac{\\frac{1}{3}}{100}". A text
    without a percent sign comes back unchanged."""
    if len(text) > MAX_ANALYSED_CHARS:
        return text
    m = _PERCENT.search(text)
    if not m:
        return text
    if m.end() < len(text.rstrip(" .$")) or _PERCENT.search(text, m.end()):
        return text  # a percent in the middle: left to the comparison (and usually failing)
    body = text[: m.start()]
    while True:  # spacing before the sign: "6\\,\\%", "6 \\%"
        cut = next((t for t in ("\\,", "\\;", "\\:", "\\!", "\\ ", "~", " ", "$") if body.endswith(t)), None)
        if cut is None:
            break
        body = body[: -len(cut)]
    body = body.strip().strip("$").strip()
    per = 1000 if m.group("mille") else 10000 if m.group("myriad") else 100
    if _PLAIN_NUMBER.fullmatch(body):
        try:
            value = Decimal(body.replace(",", "").replace("−", "-")) / per
            return format(value.normalize(), "f")
        except InvalidOperation:
            pass
    return f"\\frac{{{body}}}{{{per}}}" if body else text


# --- unevaluated computation ---------------------------------------------------------------

_SPACING = re.compile(r"\\(?:left|right|displaystyle|[,;:! ]|quad|qquad)(?![a-z])|[$~]")
_DEGREE = re.compile(r"\^\s*\{?\s*\\circ\s*\}?|°")
_SCIENTIFIC = re.compile(
    r"(\d)\s*(?:\\times|\\cdot|×|·|\*)\s*10\s*\^\s*(?:\{\s*[-+−]?\s*\d+\s*\}|[-+−]?\d)"
    r"|(\d)[eE][-+]?\d+"
)
_FRAC = re.compile(
    r"\\[dt]?frac\s*\{\s*([-+−]?\s*\d+(?:\.\d+)?)\s*\}\s*\{\s*([-+−]?\s*\d+(?:\.\d+)?)\s*\}"
    r"|\\[dt]?frac\s*(\d)(\d)"
    r"|\{\s*([-+−]?\d+(?:\.\d+)?)\s*\\over\s*([-+−]?\d+(?:\.\d+)?)\s*\}"
    r"|(?<![\d.])(\d+(?:\.\d+)?)\s*(?:/|÷|\\div)\s*(\d+(?:\.\d+)?)(?![\d.])"
)
_SQRT = re.compile(r"\\sqrt\s*(\[[^\]]*\])?\s*(?:\{\s*(\d+)\s*\}|(\d)|\{)|√\s*(\d+)?")
_KINDS = [
    ("product", re.compile(r"\\times|\\cdot|\\ast|×|·|∗|\*|\btimes\b|\bmultiplied\b", re.I)),
    # A "/" or \\frac between non-numbers (\\pi/2, \\frac{\\sqrt{3}}{2}) is a value form; between
    # numbers it was taken by _fraction_kinds already.
    ("quotient", re.compile(r"\\div|÷|\bdivided\b|\bover\b|(?:^|[^\w}])\d+(?:\.\d+)?\s*/\s*\(|\)\s*/\s*[\d(]", re.I)),
    ("implicit_product", re.compile(r"[\d)]\s*\((?!\s*[-+−]?\d+\s*,)|\)\s*\d")),
    ("power", re.compile(r"[\d)\]}!]\s*(?:\^|\*\*)|[²³¹⁰⁴-⁹]|\bsquared\b|\bcubed\b|\bpower\b", re.I)),
    ("factorial", re.compile(r"!|\bfactorial\b", re.I)),
    (
        "binomial",
        re.compile(
            r"\\[dt]?binom|\\choose|\bchoose\b|\b[nN]?C[rR]?\s*\(|\^\s*\{?\d+\}?\s*C|\bC_|\bC\s*[\^_]\s*\{?\s*\d|"
            r"\\mathrm\{C\}|\\(?:operatorname|mathrm)\{(?:C|binom)\}",
            re.I,
        ),
    ),
    ("permutation", re.compile(r"\bP\s*\(\s*\d|\bnPr\b|\}\s*P\s*_|\bP_\s*\{?\d")),
    ("sum", re.compile(r"\\sum|∑|\bsum\b", re.I)),
    ("product_over", re.compile(r"\\prod|∏|\bprod\b", re.I)),
    ("integral", re.compile(r"\\[io]*int|∫", re.I)),
    ("limit", re.compile(r"\\lim(?![a-z])", re.I)),
    (
        "function",
        re.compile(
            r"\\(?:log|ln|lg|exp|sin|cos|tan|cot|sec|csc|arcsin|arccos|arctan|sinh|cosh|tanh|gcd|lcm|"
            r"max|min|det|floor|lfloor|lceil|mod|bmod|pmod)(?![a-z])|\b(?:gcd|lcm|mod|log|ln|floor|"
            r"ceil|max|min|abs|exp|sqrt)\b|\\operatorname\{",
            re.I,
        ),
    ),
    ("root", re.compile(r"\\sqrt\s*\[|∛|∜")),
    (
        "sum_or_difference",
        re.compile(r"(?:[\d)\]}!.]|\\pi|\bpi\b)\s*(?:[-+−]|\bplus\b|\bminus\b)\s*(?=[-+−]?\s*[\d(\\{.a-zA-Z])", re.I),
    ),
    ("absolute", re.compile(r"\|[^|]+\|")),
]
# Letters that name a constant or a unit, not a variable.
_CONSTANTS = re.compile(r"\\[a-zA-Z]+|\b(?:pi|e|i|inf|infinity|nan)\b")


def _clean(text: str) -> str:
    t = _SPACING.sub(" ", _flatten_text(text, repl=" U "))  # a text group is a unit or a word: not a computation
    t = _DEGREE.sub(" ", t)
    return _SCIENTIFIC.sub(lambda m: m.group(1) or m.group(2), t)


def _has_variable(text: str) -> bool:
    t = _CONSTANTS.sub(" ", _flatten_text(text, repl=" "))
    return re.search(r"[a-zA-Z]", t) is not None


def _fraction_kinds(t: str) -> tuple[set, str]:
    """(kinds, the text without its numeric fractions): a fraction of two
    integers in lowest terms is a value; any other fraction of numbers
    (6/8, 84/2, \\frac{1.5}{3}, x/1) is a computation left undone."""
    kinds = set()

    def one(m):
        g = [x for x in m.groups() if x is not None]
        num, den = (x.replace(" ", "").replace("−", "-").lstrip("+") for x in g[:2])
        try:
            n, d = int(num), int(den)
        except ValueError:
            kinds.add("fraction_not_in_lowest_terms")
            return " 1 "
        if abs(d) <= 1 or gcd(n, d) != 1:
            kinds.add("fraction_not_in_lowest_terms")
        return " 1 "

    return kinds, _FRAC.sub(one, t)


def _sqrt_kinds(t: str) -> set:
    kinds = set()
    for m in _SQRT.finditer(t):
        if m.group(1):
            kinds.add("root")
        radicand = m.group(2) or m.group(3) or m.group(4)
        if radicand is None:
            kinds.add("surd")  # \sqrt{<expression>}: a value only where the reference has one
        elif isqrt(int(radicand)) ** 2 == int(radicand):
            kinds.add("square_root_of_a_square")
    return kinds


def _final_side(text: str) -> str:
    """What follows the last top-level `=`: `1234 \\times 5678 = 7006652`
    ends in a value (an `=` inside braces, as in `\\sum_{k=1}`, is not one)."""
    depth, cut = 0, -1
    for i, ch in enumerate(text):
        if ch in "{([":
            depth += 1
        elif ch in "})]":
            depth -= 1
        elif ch == "=" and depth == 0 and text[i - 1 : i] not in ("<", ">", "!", "\\"):
            cut = i
    return text[cut + 1 :] if cut >= 0 else text


def kinds_of(text: str) -> set:
    """The kinds of computation `text` holds (empty for a plain value)."""
    t = _clean(_final_side(text))
    kinds, t = _fraction_kinds(t)
    kinds |= _sqrt_kinds(t)
    t = _SQRT.sub(" 1 ", t)
    t = re.sub(r"^\s*[-+−]", " ", t)  # a sign, not a difference
    kinds |= {name for name, rx in _KINDS if rx.search(t)}
    return kinds


_NAN = re.compile(r"(?<![a-z])nan(?![a-z])", re.I)


@functools.lru_cache(maxsize=64)
def _reference_form(reference: str) -> tuple[bool, bool, bool, frozenset]:
    """(hedges, says NaN, has a variable, kinds): read once per reference
    (a task's sanity check asks ~25 probes against one reference)."""
    ref = reference[:MAX_ANALYSED_CHARS]
    return is_hedge(ref), bool(_NAN.search(ref)), _has_variable(ref), frozenset(kinds_of(ref))


def refusal(answer: str, reference: str) -> str | None:
    """Why `answer` is not compared with `reference` at all, or None."""
    answer = answer[:MAX_ANALYSED_CHARS]
    ref_hedges, ref_nan, ref_variable, ref_kinds = _reference_form(reference)
    if has_invisible(answer):
        return "invisible_character"
    if mark_on_digit(answer):
        return "combining_mark_on_digit"
    if is_hedge(answer) and not ref_hedges:
        return "hedged_answer"
    if _NAN.search(answer) and not ref_nan:
        return "not_a_number"
    if ref_variable:
        return None  # the task asks for an expression
    extra = kinds_of(answer) - ref_kinds
    return f"unevaluated_expression: {min(extra)}" if extra else None
