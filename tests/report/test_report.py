"""Cost accounting, the analyst views, and report.html, the last checked in
a real headless Chromium (installed by scripts/test.sh)."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import duckdb
import pytest

from fakes import better_scripted_backend, scripted_backend
from tasksieve.pipeline.report.command import write_report
from tasksieve.pipeline.run.command import run
from tasksieve.schemas.config import RunConfig

ARTIFACTS = Path(os.environ.get("TASKSIEVE_TEST_ARTIFACTS", Path(__file__).parents[2] / "test-artifacts"))


@pytest.fixture(scope="module")
def two_models(sample_dir, tmp_path_factory):
    """The same pool curated by two model versions into one database."""
    out = tmp_path_factory.mktemp("report")
    first = run([str(sample_dir)], str(out), RunConfig(), None, [], backend_factory=scripted_backend)
    second = run([str(sample_dir)], str(out), RunConfig(), None, [], backend_factory=better_scripted_backend)
    return out, first, second


def _one(con, sql, *params):
    return con.execute(sql, list(params)).fetchone()


@pytest.mark.slow
def test_cost_rows_add_up_to_every_figure(two_models):
    out, _, second = two_models
    con = duckdb.connect(str(out / "curation.duckdb"), read_only=True)
    rid = second["run_id"]
    total = _one(con, "select sum(usd) from costs where run_id = ?", rid)[0]
    learnable = _one(con, "select count(*) from tasks where run_id = ? and status = 'learnable'", rid)[0]
    overall = _one(
        con,
        "select spend_usd, learnable, usd_per_learnable from cost_per_useful_signal "
        "where run_id = ? and dimension = 'overall'",
        rid,
    )
    assert overall[0] == pytest.approx(total) and overall[0] == pytest.approx(second["total_usd"])
    assert overall[1] == learnable and overall[2] == pytest.approx(total / learnable)
    for dim in ("source", "batch", "domain", "difficulty"):  # every breakdown partitions the total
        assert _one(
            con, "select sum(spend_usd) from cost_per_useful_signal where run_id = ? and dimension = ?", rid, dim
        )[0] == pytest.approx(total), dim
    # Funnel money + what the learnable tasks cost = everything.
    removed = _one(con, "select sum(usd_removed) from funnel where run_id = ?", rid)[0]
    kept = _one(con, "select sum(usd) from task_facts where run_id = ? and status = 'learnable'", rid)[0]
    assert removed + kept == pytest.approx(total)
    assert _one(con, "select sum(usd) from waste where run_id = ?", rid)[0] == pytest.approx(removed)
    saved = _one(con, "select attempts_used, attempts_fixed_k from attempts_saved where run_id = ?", rid)
    assert saved[0] == _one(con, "select count(*) from attempts where run_id = ?", rid)[0] < saved[1]
    assert (
        _one(con, "select sum(tasks) from pass_rate_hist where run_id = ?", rid)[0]
        == _one(con, "select count(*) from tasks where run_id = ? and n_attempts > 0", rid)[0]
    )
    assert (
        _one(con, "select unpriced_tasks from cost_per_useful_signal where run_id = ? and dimension = 'overall'", rid)[
            0
        ]
        == 2
    )
    assert (
        '"usd_per_gpu_hour"' in _one(con, "select rates from runs where run_id = ?", rid)[0]
    )  # rates stored with the run
    con.close()


def test_two_models_compare_side_by_side(two_models):
    out, first, second = two_models
    con = duckdb.connect(str(out / "curation.duckdb"), read_only=True)
    rows = con.execute("select model_id, learnable from yield where dimension = 'overall' order by model_id").fetchall()
    assert rows == [("scripted@test", first["learnable"]), ("scripted@v2", second["learnable"])]
    assert second["learnable"] > first["learnable"]  # v2 also solves some products
    cps = dict(
        con.execute(
            "select model_id, usd_per_learnable from cost_per_useful_signal where dimension = 'overall'"
        ).fetchall()
    )
    assert cps["scripted@v2"] < cps["scripted@test"]
    con.close()


@pytest.fixture(scope="module")
def report(two_models):
    out, _, second = two_models
    path, text = write_report(out)
    return out, path, text, second


def test_terminal_summary_has_the_headlines(report):
    _, _, text, second = report
    assert f"run {second['run_id']}" in text
    assert f"learnable {second['learnable']}" in text
    assert "exact_dedup" in text and "vendor_a" in text and "expert" in text


def test_report_is_self_contained(report):
    _, path, _, _ = report
    page = path.read_text()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)  # no CDN, nothing fetched
    assert page.count('<svg class="chart"') == 6
    assert "gsm8k item test/0" in page and "duplicate of vendor_a/A-001" in page
    assert "duplicate of vendor_a/A-047 (similarity 0.9" in page  # a near duplicate, with its measured similarity


def _chromium():
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.fail(
            "chromium is not installed: scripts/test.sh installs the Debian packages chromium and chromium-driver"
        )
    return exe


def _browser(exe, profile, *args):
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
    ]
    return subprocess.run([exe, *flags, *args], capture_output=True, text=True, timeout=120)


def test_report_renders_in_headless_chromium(report, tmp_path):
    out, path, _, second = report
    exe = _chromium()
    dom = _browser(exe, tmp_path / "p1", "--dump-dom", path.as_uri()).stdout
    assert 'data-report-ready="yes"' in dom  # the page's script ran
    charts = re.findall(r'<svg class="chart" id="([^"]+)"[^>]*>(.*?)</svg>', dom, re.S)
    assert len(charts) == 6
    rendered = dict(re.findall(r'id="(chart-[^"]+)"[^>]*data-rendered-bars="(\d+)"', dom))
    for chart_id, body in charts:
        non_empty = sum(float(v) > 0 for v in re.findall(r'<rect class="bar"[^>]*data-value="([^"]+)"', body))
        assert int(rendered[chart_id]) == non_empty > 0, chart_id  # every bar with a value was laid out
    widths = re.findall(r'data-rendered-width="(\d+)"', dom)
    assert len(widths) == 6 and all(int(w) > 100 for w in widths)
    # The figures on the page are the database's.
    con = duckdb.connect(str(out / "curation.duckdb"), read_only=True)
    total, learnable, per = con.execute(
        "select spend_usd, learnable, usd_per_learnable from cost_per_useful_signal where run_id = ? and dimension = 'overall'",
        [second["run_id"]],
    ).fetchone()
    con.close()
    shown = dict(re.findall(r'data-key="([a-z_]+)" data-value="([^"]*)"', dom))
    assert float(shown["total_usd"]) == pytest.approx(total)
    assert int(shown["learnable"]) == learnable
    assert float(shown["usd_per_learnable"]) == pytest.approx(per)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "report.png"
    _browser(exe, tmp_path / "p2", "--window-size=1280,2400", f"--screenshot={shot}", path.as_uri())
    assert shot.stat().st_size > 20_000  # a real picture, not a blank page
