"""What a near pair of tasks is to each other: one relation, decided in one
place for `run`, `dedup` and `validate` (the batch engine and the Beam-free stage alike).
Beam-free.

For two tasks whose texts the character shingles link (near.py: Jaccard at
or over the threshold, or one text contained in the other), `relate` says:

- `duplicate`: the same problem. Exact copies; the same text with its
  quantities unchanged (case, spacing, a name, units reworded, sentences
  swapped); one text with a sentence added whose answer did not change.
- `variant`: the same text with a minimal edit. It shares at least half of
  its quantities with the other and its wording (the shingles linked it;
  its names are the other's), and a quantity was replaced (or a condition
  added that changes the answer). The answer may differ. Dropped by
  default (`near_variant`): a buyer paying per expert task pays for a
  problem whose solution is the other's with one number changed.
- `sibling`: the same template filled anew, other names and numbers: under
  half of the numbers shared, or other names with other numbers and another
  answer. Kept: two problems.
- `distinct`: different questions on one setup. The quantities are the
  same, but both answers are given and differ (numbers, yes/no, named
  entities, sets), or the asked quantity differs (the question sentence
  asks about other things while the rest of the text is the same). Kept,
  whatever the cosine; the evidence says which (`cleared_by`: `answer` |
  `asked_quantity`).

Evidence names what was compared: the quantities, the edited quantities
(`edited`: what the one states that the other does not, both ways), the
answers. The shingle rule that links a pair (`shingles_link`, with its
containment check) is here too, so the batch path's array filters and the
one-pair judgement use the same bounds (`jaccard_floor`).
"""

from __future__ import annotations

from collections import Counter

from tasksieve.transforms.dedup.number_guard import NUMBER, numbers_in
from tasksieve.transforms.same_problem import quantities as qty
from tasksieve.transforms.same_problem.asked import ASKED_MAX, _plain, names, question_replaced

DUPLICATE, VARIANT, SIBLING, DISTINCT = "duplicate", "variant", "sibling", "distinct"

# --- the shingle link: similar, or one text contained in the other -------------------------------

# A copy with a sentence added shares few shingles with its original when the
# sentence is long (Jaccard 0.5 for a sentence as long as the text), but holds
# nearly all of the original's: `CONTAINMENT_MIN` of the smaller text's
# shingles found in the larger, with a Jaccard of at least `CONTAINMENT_FLOOR`
# (a one-sentence task inside a long text is not a copy of it).
CONTAINMENT_MIN = 0.9
CONTAINMENT_FLOOR = 0.5
# The smaller text must have this many shingles (~50 characters): in a short
# prompt ("Calculate 18 + 51." inside "Calculate 18 + 51 - 26 - 77.") the
# added terms are the problem, and the number guard decides.
CONTAINMENT_MIN_SHINGLES = 50


def jaccard_floor(threshold: float) -> float:
    """The lowest shingle Jaccard at which a pair can still be linked (by
    containment): what every size and sketch bound in front of the
    judgement must let through (near_rule.size_bound, the sketch pruning,
    near.judge_ranked)."""
    return min(threshold, CONTAINMENT_FLOOR)


def contained(sim: float, cover: float, threshold: float) -> bool:
    """Whether a pair may be linked by containment: `cover` (the share of
    the smaller text's shingles in the larger, rounded to 4 places) at
    least CONTAINMENT_MIN, and `sim` at least the floor. The link holds
    when the smaller text's numbers are all in the larger too
    (numbers_contained: an added sentence adds numbers, it replaces none),
    whatever the number guard says of their overlap."""
    return sim >= jaccard_floor(threshold) and cover >= CONTAINMENT_MIN


def cover_of(inter: int, size_a: int, size_b: int) -> float:
    """Share of the smaller shingle set found in the other, to 4 places;
    0 when the smaller has under CONTAINMENT_MIN_SHINGLES (never contained)."""
    small = min(size_a, size_b)
    return round(inter / small, 4) if small >= CONTAINMENT_MIN_SHINGLES else 0.0


_DIGITS = NUMBER  # the numbers the number guard compares (number_guard.numbers_in)


def numbers_contained(small_text: str, large_text: str) -> bool:
    """Every number (digits) of the text with fewer is in the other: an
    added sentence adds numbers, it never replaces one."""
    return counts_contained(Counter(numbers_in(small_text)), Counter(numbers_in(large_text)))


def counts_contained(a: Counter, b: Counter) -> bool:
    """numbers_contained of two texts' number counts."""
    if sum(a.values()) > sum(b.values()):
        a, b = b, a
    return not (a - b)


# --- the relation --------------------------------------------------------------------------------


def _text(t: dict) -> str:
    return t.get("prompt") or t.get("text") or ""


def _has_answer(t: dict) -> bool:
    x = t.get("answer")
    return x is not None and str(x).strip() != ""


def _short(c: Counter, n: int = 20) -> list[str]:
    return sorted(c.elements(), key=lambda x: (len(x), x))[:n]


def _smaller_share(x: Counter, y: Counter) -> float:
    small = min(sum(x.values()), sum(y.values()))
    return 1.0 if small < 2 else sum((x & y).values()) / small


def relate(a: dict, b: dict, rules, exact: bool = False) -> tuple[str, dict]:
    """(relation, evidence) of two tasks the shingles link (see the module
    doc). `a`, `b`: dicts with `prompt` (or a pool row's `text`) and
    optional `answer`. A pair without both answers gives no answer
    evidence (pool rows carry none)."""
    from tasksieve.transforms.same_problem.rules import answers_agree

    if exact:
        return DUPLICATE, {}
    ta, tb = _text(a), _text(b)
    both = _has_answer(a) and _has_answer(b)
    if both:
        # Template siblings: most numbers other, whatever the answers.
        other = _mostly_other(ta, tb, rules)
        if other is not None:
            return SIBLING, dict(other, answer={"a": str(a.get("answer"))[:100], "b": str(b.get("answer"))[:100]})
    qa, qb = qty.quantities(ta), qty.quantities(tb)
    agree = None
    if both:
        agree = (
            True
            if str(a["answer"]).strip() == str(b["answer"]).strip()
            else answers_agree(a["answer"], b["answer"], rules.answer_timeout_s)
        )
    ev: dict = {"numbers": {"a": _short(qa), "b": _short(qb)}}
    if agree is not None:
        ev["answer"] = {"a": str(a["answer"])[:100], "b": str(b["answer"])[:100], "equivalent": agree}
    # Another question on the same setup: two problems, whatever the
    # numbers the questions state.
    replaced = question_replaced(ta, tb)
    if replaced is not None and agree is False:
        return DISTINCT, dict(ev, cleared_by="answer", why="different questions on one setup", **replaced)
    if replaced is not None and agree is None and replaced["question_word_share"] <= ASKED_MAX:
        return DISTINCT, dict(ev, cleared_by="asked_quantity", why="different questions on one setup", **replaced)
    if qa == qb:
        if agree is False and _plain(ta) != _plain(tb):
            return DISTINCT, dict(ev, cleared_by="answer", why="different questions on one setup")
        return DUPLICATE, ev
    gone, new = qa - qb, qb - qa
    edited = {"a_only": _short(gone), "b_only": _short(new)}
    wording = _wording(ta, tb)
    ev["wording_shared"] = wording
    if gone and new and wording[1] >= WORDING_MIN and minimal_edit(gone, new, qa, qb):
        # The same words, a quantity replaced: a variant, unless the names
        # changed too and the answer with them (a template filled anew).
        if both and agree is False and names(ta) != names(tb):
            return SIBLING, dict(
                ev,
                edited=edited,
                cleared_by="names+numbers",
                names={"a": sorted(names(ta))[:10], "b": sorted(names(tb))[:10]},
            )
        return VARIANT, dict(ev, edited=edited, why="quantities edited")
    if not (gone and new) and wording[0] >= WORDING_MIN:
        # One states all of the other's quantities and words, and more: a
        # sentence added. The same answer: a copy; another: a condition
        # added that changes the problem.
        if agree is False:
            return VARIANT, dict(ev, edited=edited, why="a condition added that changes the answer")
        return DUPLICATE, dict(ev, added=edited)
    if agree is False:  # other words, other quantities, another answer: two problems
        return SIBLING, dict(ev, edited=edited, cleared_by="answer+numbers")
    return DUPLICATE, ev


# Share of words (numbers masked) a variant shares with its original.
WORDING_MIN = 0.9
# Quantities a minimal edit replaces: one, or up to this share of the larger set.
EDIT_MAX = 0.25


def minimal_edit(gone: Counter, new: Counter, a: Counter, b: Counter) -> bool:
    """A minimal edit: at most one quantity replaced, or EDIT_MAX of the
    larger set. One template filled anew replaces most (two of four numbers
    drawn again is a sibling, not a variant)."""
    replaced = max(sum(gone.values()), sum(new.values()))
    return replaced <= max(1, EDIT_MAX * max(sum(a.values()), sum(b.values())))


def _wording(ta: str, tb: str) -> tuple[float, float]:
    """(share of the shorter text's words found in the longer, share of the
    longer's found in the shorter), numbers masked, as multisets: (1, 1)
    for a number edit, (1, < 1) for a sentence added."""
    wa = Counter(_DIGITS.sub("#", w) for w in _plain(ta).split())
    wb = Counter(_DIGITS.sub("#", w) for w in _plain(tb).split())
    na, nb = sum(wa.values()), sum(wb.values())
    if not na or not nb:
        return 0.0, 0.0
    common = sum((wa & wb).values())
    return round(common / min(na, nb), 4), round(common / max(na, nb), 4)


def _mostly_other(ta: str, tb: str, rules) -> dict | None:
    """Each states at least two numbers and they share under
    `numbers_min_same_answer` (0.5) of the smaller set, as digits and as
    quantities: one template filled anew."""
    if _smaller_share(Counter(_DIGITS.findall(ta)), Counter(_DIGITS.findall(tb))) >= rules.numbers_min_same_answer:
        return None
    qa, qb = qty.quantities(ta), qty.quantities(tb)
    if _smaller_share(qa, qb) >= rules.numbers_min_same_answer:
        return None
    return {"cleared_by": "numbers", "numbers": {"a": _short(qa), "b": _short(qb)}}


def variant_key(prompt: str) -> tuple[str, Counter]:
    """(a digest of the prompt with its numbers masked, names kept; its
    numbers): two tasks with one digest are variants of each other when
    they share at least half of their numbers (`variants`); with fewer,
    siblings. `select` never takes a task beside a variant of it."""
    import hashlib

    from tasksieve.transforms.normalize import normalize_text

    key = hashlib.sha256(normalize_text(_DIGITS.sub("#", prompt or "")).encode("utf-8")).hexdigest()[:16]
    return key, Counter(numbers_in(prompt or ""))


def variants(a: Counter, b: Counter) -> bool:
    """Two texts of one variant_key digest: variants when their numbers
    differ by a minimal edit (minimal_edit) that the number guard lets
    through (their multiset Jaccard at least NUMBER_OVERLAP, near dedup's
    `number_overlap` default): "Calculate 1 + 8." and "Calculate 1 + 9."
    are two problems to near dedup, and so to `select`."""
    if not (a or b):
        return True
    overlap = sum((a & b).values()) / sum((a | b).values())
    return overlap >= NUMBER_OVERLAP and minimal_edit(a - b, b - a, a, b)


NUMBER_OVERLAP = 0.5
