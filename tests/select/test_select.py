"""`tasksieve select`: value, clusters, the greedy choice under budgets and
caps, re-curation, bad input, and the sample end to end (run, select,
report in headless Chromium).

The acceptance pool is synthetic: 10 topics whose prompts differ only in
their numbers and names, each with a few "frontier" tasks (8 passes of 16)
and many near-solved or near-unsolved ones (1 or 15 of 16), written as a
curation.duckdb with the real schemas so the command reads it like a run's.
"""

from __future__ import annotations

import re
import subprocess
import sys

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tasksieve.pipeline.cli import main
from tasksieve.pipeline.select.pool import load_pool, prepare
from tasksieve.schemas.config import ConfigError, RunConfig, SelectConfig, load_config
from tasksieve.schemas.rates import load_rates
from tasksieve.schemas.records import ATTEMPT_SCHEMA, COST_SCHEMA, RESULT_SCHEMA, RUN_SCHEMA, conform
from tasksieve.transforms.select.budget import Budget, BudgetError, parse_budget
from tasksieve.transforms.select.choose import Caps, choose
from tasksieve.transforms.select.clusters import kmeans
from tasksieve.transforms.select.value import ValueFormulaError, task_values

TOPICS = [
    "A train travels {a} km in {b} hours. What is its average speed in km per hour?",
    "Find the area of a rectangle whose length is {a} cm and whose width is {b} cm.",
    "A bag holds {a} red marbles and {b} blue marbles. What is the probability of drawing a red one?",
    "Solve for x: {a}x + {b} = {c}.",
    "Write a Python function that returns the {a}th Fibonacci number, using at most {b} lines.",
    "Convert {a} degrees Celsius to degrees Fahrenheit, rounded to {b} decimal places.",
    "{name} buys {a} apples at {b} dollars each. How much money does {name} spend on apples?",
    "How many prime numbers lie strictly between {a} and {c}?",
    "Compute the derivative of {a}x^{b} + {c}x with respect to x.",
    "In the novel's opening chapter, what does the narrator {name} reveal about the lighthouse keeper after {a} years?",
]
NAMES = ["Ana", "Bo", "Chen", "Dara", "Eli", "Fay", "Gus", "Hana"]
PER_TOPIC, FRONTIER_PER_TOPIC, ATTEMPTS = 30, 6, 16


def synthetic_pool(seed: int = 7) -> list[dict]:
    """Rows of a learnable pool: topic, prompt, n_pass of ATTEMPTS, source, domain."""
    rng = np.random.default_rng(seed)
    rows = []
    for topic, template in enumerate(TOPICS):
        for j in range(PER_TOPIC):
            a, b = int(rng.integers(2, 400)), int(rng.integers(2, 60))
            prompt = template.format(a=a, b=b, c=a + b + int(rng.integers(1, 50)), name=NAMES[j % len(NAMES)])
            n_pass = 8 if j < FRONTIER_PER_TOPIC else (1 if j % 2 else 15)
            rows.append(
                {
                    "topic": topic,
                    "task_id": f"t{topic:02d}-{j:03d}",
                    "prompt": prompt,
                    "n_pass": n_pass,
                    "source": f"vendor_{'abc'[j % 3]}",
                    "domain": "code" if topic == 4 else "math",
                    "tokens": 100 + 40 * ((topic * 7 + j) % 5),
                }
            )
    return rows


def write_db(out, runs: list[tuple[str, str, str, list[dict]]]) -> None:
    """OUT/curation.duckdb with runs (run_id, model_id, started_at, tasks) in the real schemas."""
    rates = load_rates(None).to_json()
    tables = {"runs": [], "tasks": [], "attempts": [], "costs": []}
    for run_id, model_id, started, tasks in runs:
        tables["runs"].append(
            conform(
                {"run_id": run_id, "model_id": model_id, "started_at": started, "k": ATTEMPTS, "rates": rates},
                RUN_SCHEMA,
            )
        )
        for t in tasks:
            n, p = t.get("n_attempts", ATTEMPTS), t["n_pass"]
            status = t.get("status") or ("learnable" if 0 < p < n else "all_pass" if p == n else "all_fail")
            tables["tasks"].append(
                conform(
                    {
                        **t,
                        "run_id": run_id,
                        "batch_id": "b1",
                        "content_hash": "h-" + t["task_id"],
                        "n_attempts": n,
                        "n_pass": p,
                        "pass_rate": p / n,
                        "status": status,
                        "difficulty": "medium",
                    },
                    RESULT_SCHEMA,
                )
            )
            tables["attempts"] += [
                conform(
                    {
                        "run_id": run_id,
                        "content_hash": "h-" + t["task_id"],
                        "model_id": model_id,
                        "attempt_idx": i,
                        "prompt_tokens": 50,
                        "completion_tokens": t["tokens"],
                        "gen_seconds": t["tokens"] / 100,
                    },
                    ATTEMPT_SCHEMA,
                )
                for i in range(n)
            ]
            tables["costs"].append(
                conform(
                    {
                        "run_id": run_id,
                        "source": t["source"],
                        "task_id": t["task_id"],
                        "component": "expert",
                        "unit": "usd",
                        "usd": 3.0 + t.get("topic", 0),
                    },
                    COST_SCHEMA,
                )
            )
    schemas = {"runs": RUN_SCHEMA, "tasks": RESULT_SCHEMA, "attempts": ATTEMPT_SCHEMA, "costs": COST_SCHEMA}
    con = duckdb.connect(str(out / "curation.duckdb"))
    for name, rows in tables.items():
        con.register("src", pa.Table.from_pylist(rows, schema=schemas[name]))
        con.execute(f"CREATE TABLE {name} AS SELECT * FROM src")
        con.unregister("src")
    con.close()


@pytest.fixture(scope="module")
def pool_out(tmp_path_factory):
    out = tmp_path_factory.mktemp("pool")
    write_db(out, [("r1", "m@1", "2026-11-01T00:00:00", synthetic_pool())])
    return out


@pytest.fixture(scope="module")
def prepared(pool_out):
    """Embedded and clustered once (the embeddings then sit in OUT/select_cache)."""
    return prepare(load_pool(pool_out / "curation.duckdb"), SelectConfig(), pool_out)


def _topics(prep, rows):
    topic_of = {r["task_id"]: r["topic"] for r in synthetic_pool()}
    return {topic_of[prep.cand.task_id[i]] for i in rows}


# --- acceptance on the synthetic pool ---------------------------------------------


@pytest.mark.parametrize("budget", [5, 10, 40])
def test_task_budget_covers_topics_beats_random_and_holds(prepared, budget):
    prep = prepared
    choice = choose(prep.cand, Budget("tasks", budget), Caps(), 0.5)
    picked = np.nonzero(choice.rank > 0)[0]
    assert len(picked) == budget  # never more; here exactly, the pool is large enough
    allowed = min(budget, len(TOPICS))
    coverage = len(_topics(prep, picked)) / allowed
    assert coverage >= 0.95, coverage
    # The expected summed value of a random subset of this size is size x mean value.
    ratio = prep.cand.value[picked].sum() / (budget * prep.cand.value.mean())
    assert ratio >= 1.5, ratio
    assert sorted(choice.rank[picked].tolist()) == list(range(1, budget + 1))
    print(f"budget {budget}: topic coverage {coverage:.0%}, signal ratio vs random {ratio:.2f}")


def test_dollar_budget_is_never_exceeded_and_still_beats_random(prepared):
    prep = prepared
    total = prep.cand.price.sum()
    assert prep.cand.price.min() > 0 and prep.cand.price.max() > 1.5 * prep.cand.price.min()  # prices differ
    for share in (0.001, 0.02, 0.1, 0.3):
        usd = float(total * share)
        choice = choose(prep.cand, Budget("usd", usd), Caps(), 0.5)
        picked = np.nonzero(choice.rank > 0)[0]
        assert prep.cand.price[picked].sum() <= usd * (1 + 1e-12)
        assert choice.spent <= usd
    picked = np.nonzero(choose(prep.cand, Budget("usd", float(total * 0.1)), Caps(), 0.5).rank > 0)[0]
    per_usd = prep.cand.value[picked].sum() / prep.cand.price[picked].sum()
    ratio = per_usd / (prep.cand.value.sum() / total)
    assert ratio >= 1.5, ratio
    assert len(_topics(prep, picked)) == len(TOPICS)
    print(f"budget ${total * 0.1:.4f}: {len(picked)} tasks, signal per dollar vs random {ratio:.2f}")


def test_same_result_every_time(pool_out, prepared):
    first = choose(prepared.cand, Budget("tasks", 25), Caps(), 0.5)
    again = prepare(load_pool(pool_out / "curation.duckdb"), SelectConfig(), pool_out)  # from the embedding cache
    second = choose(again.cand, Budget("tasks", 25), Caps(), 0.5)
    assert first.order == second.order and first.reason == second.reason
    assert np.array_equal(kmeans(prepared.vecs, 12, seed=0), kmeans(prepared.vecs, 12, seed=0))


def test_caps_per_cluster_source_and_domain_hold(prepared):
    prep = prepared
    choice = choose(prep.cand, Budget("tasks", 40), Caps(cluster=0.1, source=0.4, domain=0.5), 0.5)
    picked = np.nonzero(choice.rank > 0)[0]
    assert np.bincount(prep.cand.cluster[picked]).max() <= 4
    assert max(np.unique([prep.cand.source[i] for i in picked], return_counts=True)[1]) <= 16
    assert max(np.unique([prep.cand.domain[i] for i in picked], return_counts=True)[1]) <= 20
    blocked = [r for r, k in zip(choice.reason, choice.rank) if k == 0 and "at its cap" in r]
    assert blocked  # the unchosen say which cap stopped them


def test_kmeans_finds_the_topics(prepared):
    labels = kmeans(prepared.vecs, len(TOPICS), seed=0)
    topic_of = {r["task_id"]: r["topic"] for r in synthetic_pool()}
    topics = np.array([topic_of[t] for t in prepared.cand.task_id])
    purity = sum(np.bincount(topics[labels == c]).max() for c in np.unique(labels)) / len(labels)
    assert purity >= 0.9, purity


# --- value ----------------------------------------------------------------------


def test_value_shrinks_few_attempts_toward_the_pool():
    # Two tasks at a raw 0.5: one measured by 2 attempts, one by 16; the pool mostly fails.
    value, p, m = task_values([1, 8, 1, 1], [2, 16, 16, 16], prior_strength=4)
    assert m == pytest.approx(11 / 50)
    assert p[0] == pytest.approx((1 + 4 * m) / 6) and p[1] == pytest.approx((8 + 4 * m) / 20)
    assert value[1] > value[0]  # the well-measured 0.5 is worth more than the guessed one
    assert value == pytest.approx(p * (1 - p))
    no_shrink, p0, _ = task_values([1, 8], [2, 16], prior_strength=0)
    assert p0 == pytest.approx([0.5, 0.5]) and no_shrink == pytest.approx([0.25, 0.25])


def test_value_formula_is_replaceable_but_never_runs_code():
    v, p, _ = task_values([4], [8], formula="1 - p**G - (1 - p)**G", prior_strength=0, group_size=4)
    assert v == pytest.approx([1 - 0.5**4 * 2])
    for bad in ("__import__('os')", "p.real", "open('x')", "p if p else 1", "1 +"):
        with pytest.raises(ValueFormulaError):
            task_values([1], [2], formula=bad)
    assert task_values([1], [2], formula="log(p - 1)")[0].tolist() == [0.0]  # NaN -> 0, never a crash


def test_config_section_rejects_bad_values(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("[select]\nvalue = \"exec('x')\"\n")
    with pytest.raises(ConfigError, match="select.value"):
        load_config(cfg)
    cfg.write_text("[select]\nmax_cluster_share = 0\n")
    with pytest.raises(ConfigError, match="select.max_cluster_share"):
        load_config(cfg)
    assert RunConfig().select == SelectConfig()


def test_budget_parsing():
    assert parse_budget("20", None) == Budget("tasks", 20.0)
    assert parse_budget(None, "$1.5") == Budget("usd", 1.5)
    for tasks, usd, words in [
        ("0", None, "at least 1"),
        ("-3", None, "at least 1"),
        ("ten", None, "whole number"),
        ("2.5", None, "whole number"),
        (None, "0", "positive"),
        (None, "-1", "positive"),
        (None, "nan", "positive"),
        (None, "inf", "positive"),
        (None, "lots", "not a number"),
        ("5", "5", "not both"),
        (None, None, "give a budget"),
    ]:
        with pytest.raises(BudgetError, match=words):
            parse_budget(tasks, usd)


# --- the command on the synthetic database -----------------------------------------


def test_select_writes_parquet_and_tables(pool_out, prepared, capsys):
    assert main(["select", str(pool_out), "--budget-tasks", "12", "--by", "cluster", "domain"]) == 0
    text = capsys.readouterr().out
    assert "selected 12 of 300" in text and "by domain" in text
    sel = pq.read_table(pool_out / "selected.parquet").to_pylist()
    assert [r["rank"] for r in sel] == list(range(1, 13))
    assert all(r["reason"] and r["prompt"] and r["value"] > 0 for r in sel)
    con = duckdb.connect(str(pool_out / "curation.duckdb"), read_only=True)
    sid = con.execute("select selection_id from selections order by created_at desc limit 1").fetchone()[0]
    n_rows, n_sel = con.execute(
        "select count(*), count(*) filter (where selected) from selection where selection_id = ?", [sid]
    ).fetchone()
    assert (n_rows, n_sel) == (300, 12)
    ratio, covered = con.execute(
        "select value_ratio, clusters_covered from selections where selection_id = ?", [sid]
    ).fetchone()
    assert ratio >= 1.5 and covered >= 10
    reps = con.execute("select representatives from selection_clusters where selection_id = ?", [sid]).fetchall()
    assert reps and all("prompt" in r[0] for r in reps)
    con.close()
    assert not list(pool_out.glob(".*.tmp*"))


def test_dry_run_prices_every_level_and_writes_nothing(tmp_path, capsys):
    write_db(tmp_path, [("r1", "m@1", "2026-11-01T00:00:00", synthetic_pool()[:60])])
    assert main(["select", str(tmp_path), "--budget-tasks", "8", "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert re.search(r"\b2 tasks\s+2\b", text) and re.search(r"\b32 tasks\s+32\b", text)
    assert "dry run: no selection written" in text and not (tmp_path / "selected.parquet").exists()
    con = duckdb.connect(str(tmp_path / "curation.duckdb"), read_only=True)
    assert "selection" not in {r[0] for r in con.execute("show tables").fetchall()}
    con.close()


def test_newer_model_graduates_tasks_and_its_rates_are_used(tmp_path, capsys):
    old = synthetic_pool()[:40]
    new = [dict(t, n_pass=ATTEMPTS) if i < 5 else dict(t, n_pass=8) for i, t in enumerate(old[:30])]
    write_db(tmp_path, [("r1", "m@1", "2026-11-01T00:00:00", old), ("r2", "m@2", "2026-11-20T00:00:00", new)])
    assert main(["select", str(tmp_path), "--budget-tasks", "100"]) == 0
    text = capsys.readouterr().out
    assert "graduated: 5 tasks" in text and "not measured by m@2: 10 tasks" in text
    con = duckdb.connect(str(tmp_path / "curation.duckdb"), read_only=True)
    rows = con.execute("select task_id, graduated, selected, pass_rate, model_id, reason from selection").fetchall()
    con.close()
    graduated = [r for r in rows if r[1]]
    assert sorted(r[0] for r in graduated) == sorted(t["task_id"] for t in new[:5])
    assert all(not r[2] and "graduated" in r[5] for r in graduated)
    chosen = [r for r in rows if r[2]]
    assert len(chosen) == 25 and all(r[3] == 0.5 and r[4] == "m@2" for r in chosen)


# --- bad input: one line, a documented exit code, never a traceback ----------------


def _cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "tasksieve.pipeline.cli", "select", *args], capture_output=True, text=True, timeout=300
    )


@pytest.mark.slow
def test_bad_input_exits_with_one_line(tmp_path):
    write_db(tmp_path, [("r1", "m@1", "2026-11-01T00:00:00", synthetic_pool()[:4])])
    empty = tmp_path / "empty"
    empty.mkdir()
    write_db(empty, [("r1", "m@1", "2026-11-01T00:00:00", [dict(t, n_pass=ATTEMPTS) for t in synthetic_pool()[:3]])])
    bare = tmp_path / "bare"
    bare.mkdir()
    cases = [
        ((str(tmp_path / "nope"), "--budget-tasks", "5"), 1, "not a folder"),
        ((str(bare), "--budget-tasks", "5"), 1, "no curation.duckdb"),
        ((str(empty), "--budget-tasks", "5"), 1, "no learnable task"),
        ((str(tmp_path), "--budget-tasks", "0"), 2, "at least 1"),
        ((str(tmp_path), "--budget-tasks", "-4"), 2, "at least 1"),
        ((str(tmp_path), "--budget-usd", "abc"), 2, "not a number"),
        ((str(tmp_path), "--budget-usd", "-1"), 2, "positive"),
        ((str(tmp_path), "--budget-tasks", "3", "--budget-usd", "1"), 2, "not both"),
        ((str(tmp_path),), 2, "give a budget"),
        ((str(tmp_path), "--budget-tasks", "3", "--run-id", "r9"), 1, "run r9 is not in"),
    ]
    for args, code, words in cases:
        p = _cli(*args)
        lines = [l for l in p.stderr.splitlines() if l.strip()]
        assert p.returncode == code, (args, p.stderr)
        assert len(lines) == 1 and lines[0].startswith("tasksieve: error:") and words in lines[0], (args, p.stderr)
        assert "Traceback" not in p.stderr and not p.stdout.strip()


# --- the bundled sample end to end: run, select 20, report in headless Chromium ----


@pytest.fixture(scope="module")
def sample_selected(sample_dir, tmp_path_factory):
    from fakes import better_scripted_backend  # the scripted model that makes more than 20 tasks learnable
    from tasksieve.pipeline.report.command import write_report
    from tasksieve.pipeline.run.command import run

    out = tmp_path_factory.mktemp("demo-out")
    figures = run([str(sample_dir)], str(out), RunConfig(), None, [], backend_factory=better_scripted_backend)
    assert figures["learnable"] > 20
    assert main(["select", str(out), "--budget-tasks", "20"]) == 0
    path, text = write_report(out)
    return out, path, text


@pytest.mark.slow
def test_sample_selection_end_to_end(sample_selected):
    out, _, text = sample_selected
    sel = pq.read_table(out / "selected.parquet").to_pylist()
    assert len(sel) == 20 and len({r["task_id"] for r in sel}) == 20
    con = duckdb.connect(str(out / "curation.duckdb"), read_only=True)
    learnable = {r[0] for r in con.execute("select task_id from tasks where status = 'learnable'").fetchall()}
    summary = con.execute("select selection_id, n_selected, selected_value, random_value from selections").fetchall()
    con.close()
    assert {r["task_id"] for r in sel} <= learnable
    assert len(summary) == 1 and summary[0][1] == 20 and summary[0][2] >= summary[0][3]
    assert f"selection {summary[0][0]}: 20 of" in text


def test_report_shows_the_selection_in_headless_chromium(sample_selected, tmp_path):
    from test_report import ARTIFACTS, _browser, _chromium

    out, path, _ = sample_selected
    dom = _browser(_chromium(), tmp_path / "p", "--dump-dom", path.as_uri()).stdout
    assert 'data-report-ready="yes"' in dom and 'id="selection"' in dom
    for chart_id in ("chart-select-cluster", "chart-select-per-usd"):
        body = re.search(rf'<svg class="chart" id="{chart_id}"[^>]*>(.*?)</svg>', dom, re.S).group(1)
        rendered = re.search(rf'id="{chart_id}"[^>]*data-rendered-bars="(\d+)"', dom).group(1)
        non_empty = sum(float(v) > 0 for v in re.findall(r'<rect class="bar"[^>]*data-value="([^"]+)"', body))
        assert int(rendered) == non_empty > 0, chart_id
    con = duckdb.connect(str(out / "curation.duckdb"), read_only=True)
    n, value, rnd, per = con.execute(
        "select n_selected, selected_value, random_value, signal_per_usd from selections"
    ).fetchone()
    clusters = con.execute("select count(*) from selection_clusters").fetchone()[0]
    con.close()
    shown = dict(re.findall(r'data-key="([a-z_]+)" data-value="([^"]*)"', dom))
    assert int(shown["select_n"]) == n == 20
    assert float(shown["select_signal"]) == pytest.approx(value)
    assert float(shown["select_random_signal"]) == pytest.approx(rnd)
    assert float(shown["select_signal_per_usd"]) == pytest.approx(per)
    assert (
        dom.count("<tr>", dom.index('id="table-select-cluster"'), dom.index('id="table-select-band"')) == clusters + 1
    )
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    _browser(
        _chromium(),
        tmp_path / "p2",
        "--window-size=1280,4000",
        f"--screenshot={ARTIFACTS / 'report-selection.png'}",
        path.as_uri() + "#selection",
    )


@pytest.mark.parametrize(
    "vecs",
    [
        np.full((2, 4), np.nan, dtype=np.float32),
        np.zeros((3, 4), dtype=np.float32),
        np.zeros(2, dtype=np.float32),
        np.array([["a", "b"], ["c", "d"]]),
    ],
)
def test_a_hostile_embedding_cache_in_a_shared_folder_is_ignored(tmp_path, vecs):
    """OUT may be shared: a cache with NaNs, a length that does not match its
    keys, the wrong shape or not numbers is re-computed, never trusted."""
    from tasksieve.pipeline.select.pool import EMBED_CACHE, cached_embeddings
    from tasksieve.transforms.same_problem.embed import MODEL_NAME

    prompts = ["What is 2 + 3?", "Name the capital of France."]
    honest = cached_embeddings(tmp_path / "clean", prompts)
    import hashlib

    keys = [hashlib.blake2b(p.encode(), digest_size=16).hexdigest() for p in prompts]
    (tmp_path / "out" / "select_cache").mkdir(parents=True)
    np.savez(tmp_path / "out" / EMBED_CACHE, model=np.array(MODEL_NAME), keys=np.array(keys), vecs=vecs)
    got = cached_embeddings(tmp_path / "out", prompts)
    assert np.isfinite(got).all() and np.allclose(got, honest, atol=1e-5)
