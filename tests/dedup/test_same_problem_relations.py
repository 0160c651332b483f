"""Issue 43: one relation for every near pair (duplicate, variant, sibling,
or two questions on one setup), decided by same_problem.relation for `run`,
`dedup` and `validate`; copies with a sentence added; reworded benchmark
items found by their answer and quantities; relations per vendor in
`validate`."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from tasksieve.transforms.batch.candidates import band_edges  # noqa: E402
from tasksieve.transforms.dedup.minhash import MinHashParams  # noqa: E402
from tasksieve.transforms.dedup.near import bucket_edges, find_near_duplicates  # noqa: E402
from tasksieve.transforms.normalize import with_hash  # noqa: E402
from tasksieve.transforms.same_problem import relation  # noqa: E402
from tasksieve.transforms.same_problem.rules import Rules, answers_agree  # noqa: E402

P = MinHashParams()
R = Rules()
STORY = (
    "Priya has 24 marbles and buys 3 bags with 8 marbles in each bag. She then gives 5 marbles to her "
    "brother Tomasz. How many marbles does Priya have now?"
)


def _t(tid, prompt, answer="43", line=0, day=1, source="v"):
    return with_hash(
        {
            "task_id": tid,
            "source": source,
            "domain": "math",
            "prompt": prompt,
            "answer": answer,
            "created_at": f"2026-01-{day:02d}",
            "source_file": f"{source}.jsonl",
            "line": line,
        }
    )


def _decide(*tasks, **kw):
    return {t["task_id"]: (tag, t) for tag, t in find_near_duplicates(list(tasks), [], P, 0.7, **kw)}


def test_each_relation_by_its_rule():
    a = _t("a", STORY)
    # The same problem: a name changed, numbers and answer kept.
    kind, _ = relation.relate(a, _t("b", STORY.replace("Tomasz", "Henrik")), R)
    assert kind == relation.DUPLICATE
    # A variant: one quantity edited, its answer recomputed (or not).
    kind, ev = relation.relate(a, _t("b", STORY.replace("24 marbles", "26 marbles"), "45"), R)
    assert kind == relation.VARIANT and ev["edited"] == {"a_only": ["24"], "b_only": ["26"]}
    # A sibling: the template filled anew, other names and numbers.
    sib = (
        STORY.replace("Priya", "Ines").replace("24", "31").replace("3 bags", "4 bags").replace("8 marbles", "6 marbles")
    )
    kind, _ = relation.relate(a, _t("b", sib, "45"), R)
    assert kind == relation.SIBLING
    # Another name with one number edited and another answer: a template filled anew, not a variant.
    kind, ev = relation.relate(a, _t("b", STORY.replace("Priya", "Ines").replace("24", "30"), "49"), R)
    assert kind == relation.SIBLING and ev["cleared_by"] == "names+numbers"
    # A sentence added: a copy with the same answer, a variant with another.
    added = STORY.replace("How many", "It rained all day. How many")
    assert relation.relate(a, _t("b", added), R)[0] == relation.DUPLICATE
    cond = STORY.replace("How many", "Then she loses 2 more. How many")
    assert relation.relate(a, _t("b", cond, "41"), R)[0] == relation.VARIANT


@pytest.mark.slow  # the meaning stage: the model loads
def test_different_questions_on_one_setup_are_two_problems_and_say_why():
    setup = "Let $x_1 = 7$ and $x_{n+1} = x_n^2 - 3 x_n + 5$ for $n \\geq 1$."
    a, b = (
        _t("a", setup + " Could $x_p = x_q$ for some $p \\neq q$?", "No"),
        _t("b", setup + " Must $x_n \\neq 0$ for every $n$?", "Yes"),
    )
    kind, ev = relation.relate(a, b, R)
    assert kind == relation.DISTINCT and ev["cleared_by"] == "answer"
    assert [tag for tag, _ in _decide(a, b).values()] == ["kept", "kept"]
    # Without answers: the asked thing decides, whatever the cosine.
    story = "A shop has 40 red pens and 25 blue pens. It sells 12 red pens on Monday."
    a, b = _t("a", story + " How many red pens are left?", None), _t("b", story + " What share of pens is blue?", None)
    kind, ev = relation.relate(a, b, R)
    assert kind == relation.DISTINCT and ev["cleared_by"] == "asked_quantity"
    assert [tag for tag, _ in _decide(a, b).values()] == ["kept", "kept"]
    # A synonym in the question is still one question.
    c = _t("c", story + " How many red pens remain?", None)
    assert relation.relate(_t("a", story + " How many red pens are left?", None), c, R)[0] == relation.DUPLICATE


def test_answers_compare_as_numbers_yes_no_sets_and_names():
    assert answers_agree("Yes", "no") is False and answers_agree("yes.", "Yes") is True
    assert answers_agree("{1, 2, 3}", "{3, 2, 1}") is True and answers_agree("1, 2, 3", "1, 2, 4") is False
    assert answers_agree("Paris", "London") is False and answers_agree("Marie Curie", "marie curie") is True
    assert answers_agree("Paris", "Paris, France") is None  # one shares a word with the other: no evidence
    assert answers_agree("B", "C") is None  # option letters depend on the options' order
    assert answers_agree("1,000", "1000") is True


def test_a_copy_with_a_long_sentence_added_is_dropped_in_every_path():
    """Its Jaccard is far under the threshold; the sentence-set candidates
    find it and the containment link confirms it, the same in the dict and
    the array bucket paths."""
    a = _t("a", STORY)
    long = "The marbles were bought at the big toy store downtown that opened last spring next to the old library."
    b = _t("b", STORY.replace("She then", long + " She then"), line=1, day=2)
    assert bucket_edges([a, b], [], P) == band_edges([a, b], [], P) == {tuple(sorted(("v\x1fa", "v\x1fb")))}
    for cands in (bucket_edges, band_edges):
        got = {
            t["task_id"]: (tag, t)
            for tag, t in find_near_duplicates([a, b], [], P, 0.7, semantic=False, candidates=cands)
        }
        assert got["a"][0] == "kept" and got["b"][0] == "dropped"
        ev = json.loads(got["b"][1]["drop_detail"])
        assert ev["generator"] == "containment" and 0.5 <= ev["similarity"] < 0.6 and ev["containment"] >= 0.9
    # A sentence that replaces a number is no copy: the other's numbers are not all there.
    c = _t("c", STORY.replace("She then gives 5 marbles", long + " She then gives 6 marbles"), "42", 1, 2)
    assert [tag for tag, _ in _decide(a, c, semantic=False).values()] == ["kept", "kept"]


def test_keep_variants_keeps_n_per_original_in_its_template_group():
    tasks = [_t("a", STORY)] + [
        _t(f"v{k}", STORY.replace("gives 5", f"gives {6 + k}"), str(42 - k), k + 1, k + 2) for k in range(3)
    ]
    got = _decide(*tasks)
    assert [got[t][0] for t in ("a", "v0", "v1", "v2")] == ["kept", "dropped", "dropped", "dropped"]
    assert all(got[t][1]["drop_reason"] == "near_variant" for t in ("v0", "v1", "v2"))
    assert json.loads(got["v1"][1]["drop_detail"])["variant_of"] == "a"
    got = _decide(*tasks, keep_variants=2)
    assert [got[t][0] for t in ("a", "v0", "v1", "v2")] == ["kept", "kept", "kept", "dropped"]
    assert got["v0"][1]["template_group"] == got["a"][1]["template_group"]


@pytest.mark.slow
def test_reworded_benchmark_items_are_found_by_answer_and_quantities():
    from tasksieve.schemas.config import DecontamConfig
    from tasksieve.transforms.decontam.index import build_index, index_options

    index = build_index(8, ["gsm8k"], [], **index_options(DecontamConfig()))
    # GSM8K test/3, names and objects swapped, numbers and answer kept: few words left.
    task = _t(
        "r",
        "Kwame chooses to run 3 laps three times a week. He covers 60 meters per lap. "
        "What distance does he cover weekly, in meters?",
        "540",
    )
    ev = index.judge(task)
    assert ev is not None and ev["benchmark_item"] == "test/3"
    # The same rewording with other numbers and answer: a look-alike, clean.
    assert index.judge(_t("r", task["prompt"].replace("60", "75"), "675")) is None


def test_validate_counts_relations_per_vendor_and_flags_padding():
    from tasksieve.pipeline.validate.delivery_checks import where
    from tasksieve.pipeline.validate.duplicate_checks import duplicates_within
    from tasksieve.pipeline.validate.relations_check import relations
    from tasksieve.schemas.config import DedupConfig

    rows = [_t("a", STORY, source="pad")]
    rows += [
        _t(f"v{k}", STORY.replace("gives 5", f"gives {6 + k}"), str(42 - k), k + 1, k + 2, "pad") for k in range(3)
    ]
    sib = (
        STORY.replace("Priya", "Ines").replace("24", "31").replace("3 bags", "4 bags").replace("8 marbles", "6 marbles")
    )
    rows += [
        _t("x", "A bus has 40 seats and 13 are empty. How many are taken?", "27", 0, 1, "ok"),
        _t("y", sib, "45", 1, 1, "ok"),
        _t("z", "Solve for x: 3x + 4 = 19.", "5", 2, 1, "ok"),
    ]
    near: dict = {}
    within = duplicates_within(rows, 1.0, DedupConfig(semantic=False), R, near_out=near)
    assert {o["task_id"] for o in within["offenders"] if o["match"] == "variant"} == {"v0", "v1", "v2"}
    got = relations(rows, [o for o in within["offenders"] if o["match"] == "exact"], near)
    pv = got["details"]["per_vendor"]
    # The original and ok's y fill one template (other names and numbers): siblings, across vendors.
    assert pv["pad"] == {
        "rows": 4,
        "duplicates": 0,
        "variants": 3,
        "siblings": 1,
        "variant_share": 0.75,
        "padding": True,
    }
    assert pv["ok"] == {
        "rows": 3,
        "duplicates": 0,
        "variants": 0,
        "siblings": 1,
        "variant_share": 0.0,
        "padding": False,
    }
    assert got["status"] == "fail" and got["details"]["padding"] == ["pad"]
    assert {o["task_id"] for o in got["offenders"]} == {"v0", "v1", "v2"}
    assert all(o["where"] == where(next(r for r in rows if r["task_id"] == o["task_id"])) for o in got["offenders"])


def test_one_number_edited_is_a_variant_whatever_its_answer_and_keep_variants_keeps_it():
    """Issue 43: the same text with one number edited (its answer
    recomputed, or not) is a variant: dropped as near_variant naming the
    original and the edit; `keep_variants` keeps it."""
    prompt = (
        "A shop sells pens at $3 each. On Monday it sells 34 pens "
        "and on Tuesday 17 pens. How much money does it make on the two days?"
    )
    a = _t("a", prompt, "153", 0, 1)
    b = _t("b", prompt.replace("34", "36"), "159", 1, 2)
    c = _t("c", prompt.replace("34", "36"), "153", 2, 2)  # the edit kept the answer: a variant too
    for other in (b, c):
        out = list(find_near_duplicates([a, other], [], P, 0.7))
        assert [(t, r["task_id"]) for t, r in out] == [("kept", "a"), ("dropped", other["task_id"])]
        d = out[1][1]
        ev = json.loads(d["drop_detail"])
        assert d["drop_reason"] == "near_variant" and ev["variant_of"] == "a"
        assert ev["edited"] == {"original_only": ["34"], "variant_only": ["36"]}
        kept = list(find_near_duplicates([a, other], [], P, 0.7, keep_variants=1))
        assert [t for t, _ in kept] == ["kept", "kept"]
        assert kept[0][1]["template_group"] == kept[1][1]["template_group"]


def test_capitalised_words_are_those_a_word_boundary_pattern_finds():
    """template.CAPITALISED is led by the capital for speed; it must find
    exactly what `\\b[A-Z][a-z][\\w'-]*` finds (so every template_group,
    and the names asked.py compares, stay as they were), on text built to
    sit at the boundaries: capitals after letters, digits, underscores,
    apostrophes, non-Latin letters, at the start and at the end."""
    import random
    import re

    from tasksieve.transforms.same_problem.template import CAPITALISED

    reference = re.compile(r"\b[A-Z][a-z][\w'-]*")
    alphabet = list("AaBbZz09_-' .,\n") + ["É", "é", "ß", "Ж", "ж", "中", "١", "\u00a0", "Ab", "aB", "Ma'am"]
    rng = random.Random(7)
    texts = ["", "A", "Ab", "aAb", "_Ab", "9Ab", "'Ab", "éAb", "ЖAb", "中Ab", "Ab-Cd", "x Ab", "AbAb", "A b"]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40))) for _ in range(20000)]
    for text in texts:
        assert CAPITALISED.findall(text) == reference.findall(text), text
        assert CAPITALISED.sub("N", text) == reference.sub("N", text), text
    # A mutant that drops the look-behind differs on a capital after a letter.
    assert re.compile(r"[A-Z][a-z][\w'-]*").findall("aAb") != reference.findall("aAb")


def test_operators_are_those_a_look_behind_first_pattern_finds():
    """quantities._OPERATOR is led by the operator for speed; it must find
    exactly what the look-behind-first pattern finds (every quantity key
    depends on it), on text built to sit at the boundaries: operators
    after and before digits, spaces, brackets, letters, each other, at the
    start and at the end, and non-ASCII digits and spaces."""
    import random
    import re

    from tasksieve.transforms.same_problem.quantities import _OPERATOR, operators

    reference = re.compile(r"(?<=[\d\s)])([-+*/×÷^=<>])(?=[\s\d(])")
    alphabet = list("0123456789 ()-+*/×÷^=<>ax\n\t.,") + ["١", "\u00a0", "\u2003", "½", "３", "－"]
    rng = random.Random(11)
    texts = ["", "-", "1-2", "1 - 2", "(1)-(2)", "a-b", "3-year-old", "1--2", ")+(", "1 -", "- 1", "1×2", "2 ÷ 4"]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 30))) for _ in range(20000)]
    for text in texts:
        assert _OPERATOR.findall(text) == reference.findall(text), text
    assert operators("Calculate 2 + 2 = 4, a 3-year-old") == {"+": 1, "=": 1}
    # A mutant whose check behind omits the operator's own place looks one character too far back.
    assert re.compile(r"([-+*/×÷^=<>])(?<=[\d\s)])(?=[\s\d(])").findall("1 - 2") != reference.findall("1 - 2")
