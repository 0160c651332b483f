"""What a near pair of tasks is to each other: one relation, decided in one
place for `run`, `dedup` and `validate` (row path and batch path alike).
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
row path's judgement use the same bounds (`jaccard_floor`).
"""

from __future__ import annotations

import re
from collections import Counter

from tasksieve.transforms.dedup.number_guard import NUMBER, numbers_in
from tasksieve.transforms.same_problem import quantities as qty

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


# --- names and the asked quantity ----------------------------------------------------------------

_CAP = re.compile(r"\b[A-Z][a-z][\w'-]*")
_SENT = re.compile(r"(?<=[.?!])\s+")
_WORD = re.compile(r"[^\W\d_]+")
_STOP = set(
    """a an the of to in on at for from by with and or but is are was were be been being do does did
has have had how many much what which who whom whose when where why will would can could should must may might
shall that this these those it its he she they them his her their him we you i me my our your there then than
if so as into about after before each every all any some no not more most less least total find compute
determine calculate give show prove number value amount answer express state write let suppose given""".split()
)


_STARTERS = set(
    """solve assume consider note using use after before during while since because although then also
however today yesterday tomorrow last next once later first second third finally meanwhile here suppose let given
calculate compute determine find write show prove express evaluate simplify""".split()
)


def names(text: str) -> set[str]:
    """The capitalised words that are not common words (a sentence's
    first word is capitalised too): the names a template is filled with."""
    return {w for w in _CAP.findall(text) if w.lower() not in _STOP and w.lower() not in _STARTERS}


def _split_question(text: str) -> tuple[str, str]:
    """(setup, question): the question is the last sentence that asks
    (ends with ?), else the last sentence."""
    sents = [s for s in _SENT.split(text.strip()) if s]
    if len(sents) < 2:
        return "", text
    at = max((i for i, s in enumerate(sents) if s.rstrip().endswith("?")), default=len(sents) - 1)
    return " ".join(sents[:at] + sents[at + 1 :]), sents[at]


def _content(text: str) -> set[str]:
    return {
        w[:-1] if len(w) > 3 and w.endswith("s") else w
        for w in (x.lower() for x in _WORD.findall(text))
        if w not in _STOP
    }


def question_replaced(ta: str, tb: str) -> dict | None:
    """Evidence that two texts put another question to one setup: the
    setups (all but the question sentence) share at least 90% of their
    words, neither question is in the other text, and the questions differ
    in their words, not only in their numbers (a number edited in the
    question is a variant)."""
    sa, qa = _split_question(ta)
    sb, qb = _split_question(tb)
    if not sa or not sb or _plain(qa) in _plain(tb) or _plain(qb) in _plain(ta):
        return None
    if _DIGITS.sub("#", _plain(qa)) == _DIGITS.sub("#", _plain(qb)):
        return None
    wa, wb = set(_plain(sa).split()), set(_plain(sb).split())
    setup = len(wa & wb) / max(1, len(wa | wb))
    if setup < 0.9:
        return None
    ca, cb = _content(qa), _content(qb)
    asked = len(ca & cb) / len(ca | cb) if ca and cb else 1.0
    return {
        "question": {"a": qa[:200], "b": qb[:200]},
        "setup_word_share": round(setup, 4),
        "question_word_share": round(asked, 4),
    }


ASKED_MAX = 0.25  # content words two questions about different things share at most


def asked_differs(ta: str, tb: str) -> dict | None:
    """question_replaced, with questions sharing at most ASKED_MAX of their
    content words: they ask about different things. The evidence for a
    pair without both answers (with them, the answers decide): one word
    swapped for a synonym in a two-word question ("left", "remaining")
    shares a third, and stays one question."""
    q = question_replaced(ta, tb)
    return q if q is not None and q["question_word_share"] <= ASKED_MAX else None


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


_PLAIN_RE = re.compile(r"\W+")


def _plain(t: str) -> str:
    return _PLAIN_RE.sub(" ", t.lower()).strip()


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


# --- template groups -----------------------------------------------------------------------------

_MASK_DIGITS = re.compile(r"\d+(?:[.,/]\d+)*")


def template_group(prompt: str) -> str:
    """The template a task fills: a digest of its prompt with every number
    (digits) and every capitalised word (names, and each sentence's first
    word) masked. Set on every task when it is hashed
    (normalize.py); siblings and variants of one template share it, and
    near dedup gives a kept variant its original's (near_decide.decide_cluster).
    `select` treats a group as one cluster for its caps."""
    import hashlib

    masked = " ".join(_MASK_DIGITS.sub("#", _CAP.sub("N", prompt or "")).lower().split())
    return "tg" + hashlib.sha256(masked.encode("utf-8", "surrogatepass")).hexdigest()[:14]


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
