"""Is this the same problem? The confirmation rules shared by decontamination,
near dedup (`run`, `dedup`) and `tasksieve validate`. Beam-free.

The candidate generators (word n-grams, in-order word coverage, MinHash,
sentence embeddings, shared quantities) find pairs that *look* alike. What
makes a problem is not its words but its quantities, its answer and, for
code, its behaviour; so a candidate is confirmed on those:

- **Numbers** (`quantities.py`): the multiset of quantities, with numbers
  written as words, fractions, LaTeX and simple units normalised. A reworded
  item keeps its numbers; a look-alike with a new question and new numbers
  does not.
- **The reference answer**, compared with the math verifier's equivalence
  (math-verify, in a worker process under a deadline), not string equality.
  A task whose answer differs from the benchmark item's *and* whose numbers
  differ is not that item.
- **Code behaviour**: the benchmark item's own tests (HumanEval's
  `check(candidate)`) run in the sandbox against the task's reference
  solution, called by the task's entry point (renames allowed). Passing
  them: the same function; failing them: a different function, whatever its
  docstring says.
- **Text, with boilerplate weighted down**: for items with too few numbers
  to judge by, the share of the item's words found in order in the task,
  each word weighted by its inverse document frequency over the benchmark
  items (and an optional background of clean tasks), so phrases that recur
  across many items ("where m and n are relatively prime positive
  integers", "Return True if") carry little evidence.

Every verdict comes with its evidence (a dict that goes into `drop_detail`).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction

from tasksieve.transforms.dedup.number_guard import numbers_in
from tasksieve.transforms.same_problem import quantities as qty
from tasksieve.transforms.same_problem.idf import Idf


@dataclass(frozen=True)
class Rules:
    """Thresholds of the same-problem rules (config: `[decontam]`/`[dedup]`)."""

    # Benchmark items: share of the item's quantities the task must state.
    numbers_min: float = 0.75
    # ... when the answers are equivalent (a rewording that lost a number's form).
    numbers_min_same_answer: float = 0.5
    # Items with fewer quantities than this are judged on text and meaning.
    min_numbers: int = 2
    # IDF-weighted in-order coverage of the item's words (number-poor items).
    text_min: float = 0.6
    # Cosine similarity that, with the numbers, confirms a semantic candidate
    # of a benchmark item; and that confirms a number-poor item on meaning.
    semantic_min: float = 0.6
    semantic_alone_min: float = 0.92
    # Near dedup: cosine for a pair with the same quantities (and answers);
    # number-free pairs need `pair_alone_min`.
    pair_min: float = 0.8
    pair_alone_min: float = 0.93
    answer_timeout_s: float = 5.0
    run_code: bool = True


# --- answers ---------------------------------------------------------------------------------

_BOXED = re.compile(r"\\boxed\s*\{(.*)\}")
_MATHY = re.compile(r"[\d\\^=]")
_PLAIN = re.compile(r"[\s$,]|\\[!,;]|\\text\{[^}]*\}")


def as_number(s: str) -> Fraction | None:
    t = _PLAIN.sub("", s).rstrip(".").lstrip("+")
    t = t[:-1] if t.endswith("%") else t
    try:
        if "/" in t:
            a, b = t.split("/")
            return Fraction(int(a), int(b))
        return Fraction(t)
    except (ValueError, ZeroDivisionError):
        return None


_YES = {"yes", "true", "y", "si", "sí", "oui", "ja"}
_NO = {"no", "false", "n", "non", "nein"}
_ENTITY_WORD = re.compile(r"^(?:[A-Z][\w.'-]*|of|de|la|le|von|van|the|and|y|et|und)$")


def _yes_no(s: str) -> str | None:
    t = re.sub(r"[^\w\s]", "", s).strip().lower()
    return "yes" if t in _YES else "no" if t in _NO else None


def _as_set(s: str) -> frozenset | None:
    """A set or list answer (`{1, 2, 3}`, `2, 3, 5`, `red and blue`): its
    elements, numbers as exact fractions; None when `s` is not one."""
    t = s.strip().rstrip(".")
    braced = t.startswith("\\{") and t.endswith("\\}") or t.startswith("{") and t.endswith("}")
    if braced:
        t = t[2:-2] if t.startswith("\\{") else t[1:-1]
    elif not re.search(r",\s", t) or re.search(r"[\\^=()\[\]]", t):
        return None
    parts = [p.strip() for p in re.split(r",\s*|\s+and\s+", t) if p.strip()]
    if len(parts) < 2 and not braced:
        return None
    out = set()
    for p in parts:
        n = as_number(p)
        out.add(n if n is not None else p.lower())
    return frozenset(out)


def _entity(s: str) -> set[str] | None:
    """A named entity (`Paris`, `Marie Curie`): up to 4 words, each
    capitalised (or a connector), no digits, not a lone option letter."""
    ws = s.strip().rstrip(".").split()
    if not ws or len(ws) > 4 or any(ch.isdigit() for ch in s) or (len(ws) == 1 and len(ws[0]) < 2):
        return None
    if not all(_ENTITY_WORD.match(w.strip(",")) for w in ws) or not ws[0][:1].isupper():
        return None
    return {w.strip(",").lower() for w in ws}


def _kind_agree(a: str, b: str) -> bool | None:
    """Yes/no, sets and named entities, compared as such; None when the
    answers are not both of one of those kinds (or an entity pair shares a
    word without being equal: "Paris" and "Paris, France")."""
    ya, yb = _yes_no(a), _yes_no(b)
    if ya is not None and yb is not None:
        return ya == yb
    if (ya is None) != (yb is None) and (as_number(a) is None and as_number(b) is None):
        other = b if ya is not None else a
        if _entity(other) is not None:
            return False  # "Yes" against "Paris": two questions
    sa, sb = _as_set(a), _as_set(b)
    if sa is not None and sb is not None:
        return sa == sb
    ea, eb = _entity(a), _entity(b)
    if ea is not None and eb is not None:
        return True if ea == eb else False if not (ea & eb) else None
    return None


_ASK = object()  # answers that only math-verify can compare


def _agree_here(a: str | None, b: str | None) -> tuple:
    """(verdict, None) when the answers compare without math-verify, else
    (_ASK, the worker request that compares them)."""
    if a is None or b is None or not str(a).strip() or not str(b).strip():
        return None, None
    a, b = str(a).strip(), str(b).strip()
    m = _BOXED.search(a)
    a = m.group(1) if m else a
    m = _BOXED.search(b)
    b = m.group(1) if m else b
    kinds = _kind_agree(a, b)
    if kinds is not None:
        return kinds, None
    if _PLAIN.sub("", a).lower() == _PLAIN.sub("", b).lower():
        return True, None
    na, nb = as_number(a), as_number(b)
    if na is not None and nb is not None:
        return na == nb, None
    if not (_MATHY.search(a) and _MATHY.search(b)):
        return None, None  # free text ("B", "10^-4 eV" vs a sentence): no evidence either way
    return _ASK, {"op": "math", "reference": a, "candidate": b}


def math_request(a: str | None, b: str | None) -> dict | None:
    """The math-verify request answers_agree(a, b) would make, or None when
    it decides without one: asked ahead in batches (decontam/ask_ahead.py),
    its answer is then found in the process's memo (verify/answer_memo.py)."""
    verdict, request = _agree_here(a, b)
    return request if verdict is _ASK else None


def answers_agree(a: str | None, b: str | None, timeout_s: float = 5.0) -> bool | None:
    """True/False when both answers are given and can be compared, None
    when either is missing or the verifier cannot decide. Plain numbers are
    compared exactly; anything else goes to math-verify's equivalence."""
    verdict, request = _agree_here(a, b)
    if verdict is not _ASK:
        return verdict
    try:
        from tasksieve.transforms.verify.math_answers import ask_with_deadline

        ans = ask_with_deadline(request, timeout_s)
    except Exception:  # the verifier is evidence, never a crash
        return None
    if ans.get("error"):
        return None
    return bool(ans.get("ok"))


# --- code ------------------------------------------------------------------------------------


def code_agrees(
    solution: str | None, entry_point: str | None, tests: str | None, support: str | None = None
) -> bool | None:
    """Does `solution` (called as `entry_point`) pass `tests`, in the sandbox?
    `support` defines the helpers the tests call besides the entry point
    (HumanEval/32's tests call `poly`, defined in its prompt); it is used
    only when it compiles. None when there is nothing to run or no safe
    sandbox."""
    if not solution or not entry_point or not tests:
        return None
    from tasksieve.transforms.verify.sandbox import runner as sandbox
    from tasksieve.transforms.verify.verifiers import calls_check, compile_error

    helpers = support if support and compile_error(support, "support") is None else ""
    try:
        run = sandbox.run_cases(
            [
                {
                    "solution": solution,
                    "tests": tests,
                    "entry_point": entry_point,
                    "call_check": calls_check(tests),
                    "support": helpers,
                }
            ],
            sandbox.Limits(),
            mode="auto",
        )
    except Exception:  # NoSafeSandbox and the like: no evidence either way
        return None
    res = run.results[0]
    if res.error and res.error.startswith("harness_error"):
        return None
    return bool(res.passed)


# --- the verdicts ------------------------------------------------------------------------------


@dataclass
class Item:
    """A benchmark item as the rules see it."""

    benchmark: str
    item_id: str
    text: str
    words: list[str]
    answer: str | None = None
    tests: str | None = None
    entry_point: str | None = None
    quantities: Counter = field(default_factory=Counter)


def _short(c: Counter, n: int = 20) -> list[str]:
    return sorted(c.elements(), key=lambda x: (len(x), x))[:n]


def confirmable(item: Item, share: float, back: float, task_words: list[str], idf: Idf, rules: Rules, cosine) -> bool:
    """Could judge_item confirm the item for some answer comparison (True,
    False or none)? Its branches below, each with the answer's outcome
    that favours it; False means the verdict is False whatever the answers."""
    if sum(item.quantities.values()) >= rules.min_numbers:
        return (
            share >= rules.numbers_min_same_answer
            or share >= rules.numbers_min
            or share >= 1.0
            or (back >= 1.0 and share >= rules.numbers_min)
        )
    return idf.coverage(item.words, task_words) >= rules.text_min or (
        cosine is not None and cosine >= rules.semantic_alone_min
    )


def judge_item(
    task: dict,
    task_words: list[str],
    item: Item,
    idf: Idf,
    rules: Rules,
    cosine: float | None = None,
    lazy_answer: bool = False,
) -> tuple[bool, dict]:
    """Is `task` the benchmark item `item`? (verdict, evidence).
    `lazy_answer`: for a caller that uses only a True verdict's evidence
    (decontamination): the answers are not compared (math-verify not
    asked) when no outcome of the comparison could confirm (`confirmable`);
    the verdict is the same, a False one's evidence shorter."""
    ev: dict = {}
    # Code behaviour first: decisive when both sides can run.
    if rules.run_code and item.tests and task.get("reference_solution"):
        passed = code_agrees(task.get("reference_solution"), task.get("entry_point"), item.tests, item.text)
        if passed is not None:
            ev["code"] = {
                "tests_of": f"{item.benchmark}/{item.item_id}",
                "entry_point": task.get("entry_point"),
                "reference_passes_item_tests": passed,
            }
            ev["confirmed_by" if passed else "cleared_by"] = "code_behaviour"
            return passed, ev
    tq = qty.quantities(task.get("prompt") or "")
    share = qty.containment(item.quantities, tq)
    back = qty.containment(tq, item.quantities)
    ev["numbers"] = {
        "item": _short(item.quantities),
        "task": _short(tq),
        "item_share_in_task": share,
        "task_share_in_item": back,
    }
    if lazy_answer and not confirmable(item, share, back, task_words, idf, rules, cosine):
        ev["cleared_by"] = "numbers" if sum(item.quantities.values()) >= rules.min_numbers else "text"
        return False, ev  # False whatever the answers say: math-verify not asked
    agree = answers_agree(task.get("answer"), item.answer, rules.answer_timeout_s) if item.answer else None
    if agree is not None:
        ev["answer"] = {"task": str(task.get("answer"))[:100], "item": str(item.answer)[:100], "equivalent": agree}
    if cosine is not None:
        ev["cosine"] = round(float(cosine), 4)
    if sum(item.quantities.values()) >= rules.min_numbers:
        if agree is True:
            same = share >= rules.numbers_min_same_answer
        elif agree is False:
            # Another answer and other numbers: not the item. Another answer on
            # the item's own numbers (all of them, or nothing but them): the
            # item, with a wrong or changed reference.
            same = share >= 1.0 or (back >= 1.0 and share >= rules.numbers_min)
        else:
            same = share >= rules.numbers_min
        ev["confirmed_by" if same else "cleared_by"] = (
            ("answer+numbers" if agree is not None else "numbers")
            if same
            else ("answer+numbers" if agree is False else "numbers")
        )
        return same, ev
    # Too few numbers to judge by: the words that matter, or the meaning.
    cov = idf.coverage(item.words, task_words)
    ev["text"] = {"idf_weighted_coverage": cov}
    if agree is False and share < 1.0:
        ev["cleared_by"] = "answer"
        return False, ev
    same = cov >= rules.text_min or (cosine is not None and cosine >= rules.semantic_alone_min)
    ev["confirmed_by" if same else "cleared_by"] = ("text" if cov >= rules.text_min else "semantic") if same else "text"
    return same, ev


def pair_quantity_key(text: str) -> str:
    """Tasks whose quantities differ can never be confirmed as paraphrases:
    near dedup only compares meanings within one key."""
    q = qty.quantities(text)
    return " ".join(sorted(q.elements())) + "|" + "".join(sorted(qty.operators(text).elements()))


def other_problem(a: dict, b: dict, rules: Rules) -> dict | None:
    """For a pair the character shingles call near-identical: evidence that
    they are two problems, or None. One template filled twice is two
    problems: when the texts state other quantities and non-equivalent
    answers, and, whatever the answers, when they state mostly other
    numbers (`_mostly_other_numbers`: generated tasks share an answer by
    chance, often). A copy with one number edited, or a sentence added,
    and the same answer stays a duplicate. A task without an answer gives
    no evidence (as pool rows, which carry none: against a pool the
    shingles decide alone)."""
    if not (_has_answer(a) and _has_answer(b)):
        return None
    ta, tb = a.get("prompt") or a.get("text") or "", b.get("prompt") or b.get("text") or ""
    # answers_agree of two equal answers is True or None, never False: for
    # them (most close candidates are copies) only the numbers can decide.
    if a["answer"] != b["answer"] and not qty.same_quantities(ta, tb):
        if answers_agree(a["answer"], b["answer"], rules.answer_timeout_s) is False:
            qa, qb = qty.quantities(ta), qty.quantities(tb)
            return {
                "cleared_by": "answer+numbers",
                "numbers": {"a": _short(qa), "b": _short(qb)},
                "answer": {"a": str(a["answer"])[:100], "b": str(b["answer"])[:100], "equivalent": False},
            }
    return _mostly_other_numbers(ta, tb, a, b, rules)


def _has_answer(task: dict) -> bool:
    x = task.get("answer")
    return x is not None and str(x).strip() != ""


def _smaller_share(x: Counter, y: Counter) -> float:
    """The part of the smaller multiset the other one holds too (1.0 when
    either holds under two: one number edited is an edit, not a new
    problem)."""
    small = min(sum(x.values()), sum(y.values()))
    return 1.0 if small < 2 else sum((x & y).values()) / small


def _mostly_other_numbers(ta: str, tb: str, a: dict, b: dict, rules: Rules) -> dict | None:
    """Evidence that two near-identical texts are two problems whatever
    their answers: each states at least two numbers (the ones the number
    guard compares, number_guard.numbers_in) and they share under
    `numbers_min_same_answer` (0.5, the benchmark rule's share when the
    answers are equivalent) of the smaller set, as digits and as
    quantities (units and number words normalised: "2 hours" is "120
    minutes"). One number edited in two or more, or a sentence added,
    shares at least half: still a copy. Digits first: most close pairs
    share them, and reading quantities costs more."""
    if _smaller_share(Counter(numbers_in(ta)), Counter(numbers_in(tb))) >= rules.numbers_min_same_answer:
        return None
    qa, qb = qty.quantities(ta), qty.quantities(tb)
    if _smaller_share(qa, qb) >= rules.numbers_min_same_answer:
        return None
    return {
        "cleared_by": "numbers",
        "numbers": {"a": _short(qa), "b": _short(qb)},
        "answer": {"a": str(a.get("answer"))[:100], "b": str(b.get("answer"))[:100]},
    }


def judge_pair(a: dict, b: dict, cosine: float, rules: Rules) -> tuple[bool, dict]:
    """Are tasks `a` and `b` (dicts with `prompt` or pool `text`, optional
    `answer`, `tests`, `entry_point`, `reference_solution`) the same problem,
    worded differently? The semantic path of near dedup: they were found as
    nearest neighbours in meaning; confirmed when they state the same
    quantities, their answers agree (when both have one) and, for code,
    each reference passes the other's tests (when they can run)."""
    ta, tb = a.get("prompt") or a.get("text") or "", b.get("prompt") or b.get("text") or ""
    qa, qb = qty.quantities(ta), qty.quantities(tb)
    oa, ob = qty.operators(ta), qty.operators(tb)
    ev = {"cosine": round(float(cosine), 4), "numbers": {"a": _short(qa), "b": _short(qb), "equal": qa == qb}}
    if oa or ob:
        ev["operators"] = {"a": "".join(sorted(oa.elements())), "b": "".join(sorted(ob.elements()))}
    if qa != qb or oa != ob:
        return False, dict(ev, cleared_by="numbers" if qa != qb else "operators")
    from tasksieve.transforms.same_problem.asked import asked_differs

    asked = asked_differs(ta, tb) if not (_has_answer(a) and _has_answer(b)) else None
    if asked is not None:  # another question on one setup, no answers to say: whatever the cosine
        return False, dict(ev, cleared_by="asked_quantity", **asked)
    need = rules.pair_min if qa else rules.pair_alone_min
    if cosine < need:
        return False, dict(ev, cleared_by="semantic", semantic_min=need)
    agree = answers_agree(a.get("answer"), b.get("answer"), rules.answer_timeout_s)
    if agree is not None:
        ev["answer"] = {"a": str(a.get("answer"))[:100], "b": str(b.get("answer"))[:100], "equivalent": agree}
        if not agree:
            return False, dict(ev, cleared_by="answer")
    if (
        rules.run_code
        and a.get("tests")
        and b.get("tests")
        and a.get("reference_solution")
        and b.get("reference_solution")
    ):
        ab = code_agrees(a.get("reference_solution"), a.get("entry_point"), b.get("tests"), b.get("reference_solution"))
        ba = code_agrees(b.get("reference_solution"), b.get("entry_point"), a.get("tests"), a.get("reference_solution"))
        if ab is not None and ba is not None:
            ev["code"] = {"a_passes_b_tests": ab, "b_passes_a_tests": ba}
            if not (ab and ba):
                return False, dict(ev, cleared_by="code_behaviour")
    return True, dict(ev, confirmed_by="semantic+numbers" + ("+answer" if agree else ""))


def rules_from_config(decontam, dedup=None) -> Rules:
    """Same-problem thresholds from `[decontam]` (and `[dedup]` for pairs)."""
    kw = {
        "numbers_min": decontam.numbers_min,
        "semantic_min": decontam.semantic_min,
        "text_min": decontam.text_min,
        "run_code": decontam.run_code,
    }
    if dedup is not None:
        kw.update(pair_min=dedup.semantic_min, pair_alone_min=dedup.semantic_alone_min)
    return Rules(**kw)
