import json

from tasksieve.transforms.decontam.benchmarks import words
from tasksieve.transforms.decontam.index import BenchmarkIndex, build_index
from tasksieve.transforms.decontam.stage import check_task
from tasksieve.transforms.dedup.exact import pick_survivor
from tasksieve.transforms.normalize import content_hash, normalize_text


def _task(tid, prompt, answer="4", source="v", created=None, line=1):
    return {
        "task_id": tid,
        "source": source,
        "domain": "math",
        "prompt": prompt,
        "answer": answer,
        "created_at": created,
        "source_file": f"{source}.jsonl",
        "line": line,
    }


def test_normalisation_folds_width_case_space_and_punctuation_spacing():
    assert normalize_text("  What IS\u00a0２ +  ２ ?\n") == "what is 2 + 2?"
    assert normalize_text("f( x ) , then") == "f(x), then"


def test_hash_ignores_presentation_but_not_content():
    a = _task("a", "What is 2 + 2?")
    assert content_hash(a) == content_hash(_task("b", "  WHAT is 2 +  2 ? "))
    assert content_hash(a) != content_hash(_task("c", "What is 2 + 3?"))
    assert content_hash(a) != content_hash(_task("d", "What is 2 + 2?", answer="5"))


def test_survivor_is_earliest_then_source_then_id_whatever_the_order():
    tasks = [
        _task("z", "p", source="b", created="2026-01-02"),
        _task("y", "p", source="c", created=None),
        _task("x", "p", source="a", created="2026-01-02"),
        _task("w", "p", source="d", created="2026-01-01"),
    ]
    for t in tasks:
        t["content_hash"] = "h"
    for order in (tasks, tasks[::-1]):
        keep, dropped = pick_survivor(list(order))
        assert keep["task_id"] == "w"
        assert [d["task_id"] for d in dropped] == ["x", "z", "y"]
        detail = json.loads(dropped[0]["drop_detail"])
        assert detail["duplicate_of"] == "w" and detail["duplicate_of_source"] == "d"
        assert all(d["drop_stage"] == "exact_dedup" and d["drop_reason"] == "exact_duplicate" for d in dropped)


def test_bundled_gsm8k_item_is_caught_with_evidence():
    index = build_index(13, ["gsm8k"], [])
    q = (
        "Janet’s ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes "
        "muffins for her friends every day with four."
    )
    dropped = check_task(_task("t", "Please solve: " + q), index)
    detail = json.loads(dropped["drop_detail"])
    assert detail["benchmark"] == "gsm8k" and detail["benchmark_item"] == "test/0"
    assert detail["ngram"] in normalize_text(q).replace("’", " ").replace(".", "")
    assert dropped["drop_reason"] == "benchmark_ngram_overlap"


def test_short_and_unrelated_prompts_are_clean():
    index = build_index(13, ["gsm8k", "aime2025", "gpqa_diamond", "humaneval"], [])
    assert index.items > 3000
    assert check_task(_task("t", "Calculate 5 + 3."), index) is None
    assert (
        check_task(
            _task("t", "A farmer has 17 sheep and buys 5 more at the market on a rainy Tuesday; how many now?"), index
        )
        is None
    )


def test_user_benchmark_file_is_indexed(tmp_path):
    f = tmp_path / "private_eval.jsonl"
    f.write_text(
        json.dumps({"id": "q-9", "question": "the quick brown fox jumps over the lazy dog near the river bank today"})
        + "\n"
    )
    index = build_index(8, [], [str(f)])
    hit = index.match("Story: The quick brown fox jumps over the lazy dog near the river, then sleeps.")
    assert hit["benchmark"] == "private_eval" and hit["benchmark_item"] == "q-9"


def test_ngram_window_needs_n_words():
    idx = BenchmarkIndex(4)
    idx.add("b", "1", "one two three four")
    assert idx.match("zero one two three four five")["ngram"] == "one two three four"
    assert idx.match("one two three") is None
    assert words("Héllo, wörld!") == ["héllo", "wörld"]


def test_short_benchmark_item_is_caught_whole_even_below_n_words(tmp_path):
    f = tmp_path / "capitals.jsonl"
    f.write_text(json.dumps({"id": "cap-1", "question": "What is the capital of Burkina Faso?"}) + "\n")
    index = build_index(13, [], [str(f)])
    dropped = check_task(_task("t", "Quiz time! what is the capital of  BURKINA FASO ? Answer in one word."), index)
    detail = json.loads(dropped["drop_detail"])
    assert detail["check"] == "short_item" and detail["benchmark_item"] == "cap-1"
    assert detail["matched_text"] == "what is the capital of burkina faso"
    assert dropped["drop_reason"] == "benchmark_short_item"
    assert check_task(_task("t", "What is the capital of Burkina?"), index) is None


def test_lightly_reworded_gsm8k_item_is_caught_by_the_fuzzy_check():
    index = build_index(13, ["gsm8k"], [])
    # GSM8K test/0 with a word changed every few words: no 13-word run survives.
    reworded = (
        "Janet's ducks laid 16 eggs each day. She eats 3 for breakfast each morning and bakes muffins "
        "for her friends each day with 4. She sells the rest at the farmers' market every day for $2 per "
        "fresh duck egg. How many dollars does she make daily at the farmers' market?"
    )
    assert build_index(13, ["gsm8k"], [], fuzzy=False).match(reworded) is None
    dropped = check_task(_task("t", reworded), index)
    detail = json.loads(dropped["drop_detail"])
    assert detail["check"] == "fuzzy" and detail["benchmark"] == "gsm8k" and detail["benchmark_item"] == "test/0"
    assert 0.7 <= detail["similarity"] < 1 and detail["matched_text"].startswith("janet s ducks lay 16 eggs")
    assert dropped["drop_reason"] == "benchmark_fuzzy_match"


def test_same_domain_text_that_was_never_published_is_clean():
    index = build_index(13, ["gsm8k", "aime2025", "gpqa_diamond", "humaneval"], [])
    for text in (
        "Mara bakes 18 trays of rolls every morning, and each tray holds 12 rolls. She sets aside 40 rolls "
        "for the shelter and sells the rest. How many rolls does she sell?",
        "A ferry carries 32 cars per crossing. It makes 5 crossings in the morning and 3 in the afternoon. "
        "How many cars can it carry in a full day?",
    ):
        assert index.match(text) is None


def _dated(task_id, created_at, source="s"):
    return {
        "task_id": task_id,
        "source": source,
        "created_at": created_at,
        "source_file": f"{source}.jsonl",
        "line": 1,
        "content_hash": "h",
    }


def test_exact_dedup_survivor_is_the_earliest_instant_not_the_smallest_text():
    # 10:00+05:00 is 05:00Z: an hour before 06:00Z, though its text sorts after.
    early = _dated("A-1", "2024-01-01T10:00:00+05:00", source="b")
    late = _dated("V-1", "2024-01-01T06:00:00Z", source="a")
    keep, dropped = pick_survivor([late, early])
    assert keep["task_id"] == "A-1"
    keep, dropped = pick_survivor([early, late])
    assert keep["task_id"] == "A-1"
    # a microsecond apart, written with two offsets: the earlier instant
    a = _dated("M-1", "2024-01-01T06:00:00.000001+00:00", source="z")
    b = _dated("M-2", "2024-01-01T07:00:00.000002+01:00", source="a")
    assert pick_survivor([b, a])[0]["task_id"] == "M-1"
    # undated rows still come last, and the same instant falls back to source
    undated = _dated("U", None, source="0")
    same = _dated("S", "2024-01-01T05:00:00+00:00", source="c")
    keep, _ = pick_survivor([undated, same, early])
    assert keep["task_id"] == "A-1"  # "b" < "c" at the same instant
