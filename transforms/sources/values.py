"""Making one parsed row safe: the limits on what a row may hold (nesting,
number length, lone surrogates, plain JSON types), JSON parsed under them,
the short reasons a person reads, and the raw-row record every reader
yields. Shared by the JSONL reader (transforms/read.py) and the table
readers (tables.py): a row is judged the same whatever file it came from.
"""

from __future__ import annotations

import json

# What we keep of an unusable row's raw text, so quarantine stays small.
RAW_KEEP_CHARS = 2000
# A quarantine reason is read by a person: short, and never a copy of the row.
REASON_MAX_CHARS = 300
# Limits on what a row may hold, so every value is safe for every coder and
# sink downstream (Beam's coders, pyarrow, DuckDB, json.dumps).
MAX_DEPTH = 64  # nesting levels of objects/lists in one row
MAX_NUMBER_DIGITS = 100  # digits of one integer literal
_MAX_INT_BITS = MAX_NUMBER_DIGITS * 3.33  # an int of more bits has over that many digits (log2 10 = 3.32)


def cap(text: str, limit: int = REASON_MAX_CHARS) -> str:
    """`text` cut to `limit` characters (marked), on one line."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --- making a parsed row safe ---------------------------------------------------------------


class RowLimitError(ValueError):
    """A parsed row holds something over a limit; the message is the reason."""


def _has_surrogate(s: str) -> bool:
    try:
        s.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


def _surrogate_at(s: str) -> str:
    for ch in s:
        if 0xD800 <= ord(ch) <= 0xDFFF:
            return f"\\u{ord(ch):04x}"
    return "?"


def _plain_object(value) -> bool:
    """An object of ASCII names whose values are ASCII text, numbers
    check_value allows, booleans or nulls: what most rows are, and nothing
    check_value can refuse (no nesting, no surrogate), so the walk is
    skipped. Exact types: LongNumber (an int) and containers go the long way."""
    if type(value) is not dict:
        return False
    for k, v in value.items():
        if type(k) is not str or not k.isascii():
            return False
        t = type(v)
        if t is str:
            if not v.isascii():
                return False
        elif t is int:
            if v.bit_length() > _MAX_INT_BITS:
                return False
        elif not (v is None or t is bool or t is float):
            return False
    return True


def check_value(value, where: str | None = None) -> None:
    """Raise RowLimitError if `value` (a parsed row or field) nests deeper
    than MAX_DEPTH, holds an integer over MAX_NUMBER_DIGITS digits, or a
    string or key with a lone surrogate (not encodable as UTF-8, so no
    coder or file can hold it). Iterative: no recursion limit to hit."""
    if _plain_object(value):
        return
    stack = [(value, 1, where)]
    while stack:
        v, depth, field = stack.pop()
        if isinstance(v, str):
            if not v.isascii() and _has_surrogate(v):  # isascii: a fast C scan, true of most text
                name = _named(field)
                raise RowLimitError(
                    f"{name} holds a lone surrogate escape ({_surrogate_at(v)}), which is not "
                    "valid Unicode text; re-export the row as UTF-8"
                )
        elif isinstance(v, bool) or v is None or isinstance(v, float):
            continue
        elif isinstance(v, LongNumber):
            name = _named(field)
            raise RowLimitError(f"{name} holds a number of {v.digits} digits, over the {MAX_NUMBER_DIGITS}-digit limit")
        elif isinstance(v, int):
            if v.bit_length() > _MAX_INT_BITS:
                name = _named(field)
                raise RowLimitError(
                    f"{name} holds an integer of over {MAX_NUMBER_DIGITS} digits, over the "
                    f"{MAX_NUMBER_DIGITS}-digit limit"
                )
        elif isinstance(v, (dict, list, tuple)):
            if depth > MAX_DEPTH:
                name = _named(field)
                raise RowLimitError(f"{name} nests deeper than the {MAX_DEPTH}-level limit")
            items = v.items() if isinstance(v, dict) else enumerate(v)
            for k, child in items:
                if isinstance(k, str) and not k.isascii() and _has_surrogate(k):
                    raise RowLimitError(
                        f"a field name holds a lone surrogate escape ({_surrogate_at(k)}), which "
                        "is not valid Unicode text; re-export the row as UTF-8"
                    )
                stack.append((child, depth + 1, field if field is not None else (k if isinstance(v, dict) else None)))


def _named(field) -> str:
    """How an error names where it is: the top-level key, capped only when
    an error is raised (most rows raise none)."""
    name = cap(str(field), 60) if field is not None else ""
    return f"field '{name}'" if name else "the row"


class LongNumber:
    """Stands for an integer literal over MAX_NUMBER_DIGITS digits while a
    row is parsed (never converted: Python refuses ints over 4,300 digits,
    and huge ones break float() and some coders); check_value rejects it,
    naming its field."""

    __slots__ = ("digits",)

    def __init__(self, digits: int):
        self.digits = digits


def _parse_int(s: str):
    digits = len(s) - (s[0] == "-")
    return LongNumber(digits) if digits > MAX_NUMBER_DIGITS else int(s)


# One decoder for every row: json.loads(text, parse_int=...) builds a new
# JSONDecoder per call, a fifth of the parse time of a typical row.
_DECODER = json.JSONDecoder(parse_int=_parse_int)


def _what(field: str | None) -> str:
    return f"field '{field}'" if field else "the row"


def loads_limited(text: str, field: str | None = None):
    """json.loads under the row limits: raises RowLimitError (a reason for a
    person, naming `field` if the text is one field's value) for nesting too
    deep, a number too long or a lone surrogate, json.JSONDecodeError for
    malformed text. Nothing else escapes."""
    try:
        if text.startswith("\ufeff"):  # what json.loads says, which the decoder alone does not check
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
        value = _DECODER.decode(text)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise RowLimitError(f"{_what(field)} nests too deeply to parse (over the {MAX_DEPTH}-level limit)") from None
    except Exception as e:  # anything else the parser may raise on hostile text
        raise RowLimitError(f"{_what(field)} cannot be parsed: {type(e).__name__}: {cap(str(e), 120)}") from None
    check_value(value, field)
    return value


def raw_row(source_file: str, line: int, record, raw: str, error: str | None) -> dict:
    return {
        "source_file": source_file,
        "line": line,
        "record": record,
        "raw": raw[:RAW_KEEP_CHARS],
        "error": None if error is None else cap(error),
    }
