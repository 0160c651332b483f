"""Names and the asked quantity: the names a template is filled with
(`names`), and whether two texts put another question to one setup
(`question_replaced`, `asked_differs`). Used by relation.py's relations and
by rules.judge_pair (the semantic path), so it imports neither."""

from __future__ import annotations

import re

from tasksieve.transforms.dedup.number_guard import NUMBER as _DIGITS
from tasksieve.transforms.same_problem.template import CAPITALISED as _CAP

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


_PLAIN_RE = re.compile(r"\W+")


def _plain(t: str) -> str:
    return _PLAIN_RE.sub(" ", t.lower()).strip()
