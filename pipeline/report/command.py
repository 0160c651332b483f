"""`tasksieve report OUT`: the headline tables in the terminal and one
self-contained `report.html` (no CDN, no network; charts are inline SVG).

Every figure is read from the views in curation.duckdb (pipeline/outputs/views.py),
so the page, the terminal and an analyst's SQL always agree. Each headline
number on the page carries its raw value in `data-value`, and each chart
reports its rendered size in `data-rendered-*` once the browser has laid it
out: the browser test reads both.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from pathlib import Path

import duckdb

from tasksieve.pipeline.outputs.output_set import visible
from tasksieve.pipeline.report.judge import judge_html, judge_terminal, load_judge
from tasksieve.pipeline.outputs.safe_fs import write_text_atomic
from tasksieve.pipeline.report.selection import load_selection, selection_html, selection_terminal

MAX_DROPPED_ROWS = 300


class ReportError(Exception):
    pass


def _rows(con, sql: str, params=()) -> list[dict]:
    cur = con.execute(sql, list(params))
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


def load_report_data(db_path: Path, run_id: str | None = None) -> dict:
    if not db_path.exists():
        raise ReportError(f"no curation.duckdb at {db_path}; run `tasksieve run` first")
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        runs = _rows(con, "select * from runs order by started_at")
        if not runs:
            raise ReportError(f"{db_path} holds no runs")
        run = next((r for r in runs if r["run_id"] == run_id), None) if run_id else runs[-1]
        if run is None:
            raise ReportError(f"run {run_id} not in {db_path} (known: {', '.join(r['run_id'] for r in runs)})")
        rid = run["run_id"]
        cps = _rows(con, "select * from cost_per_useful_signal where run_id = ? order by dimension, value", [rid])
        return {
            "run": run,
            "runs": [{k: r[k] for k in ("run_id", "model_id", "started_at")} for r in runs],
            "funnel": _rows(con, "select * from funnel where run_id = ? order by stage_order", [rid]),
            "hist": _rows(con, "select * from pass_rate_hist where run_id = ? order by bin_lo", [rid]),
            "yield": _rows(con, "select * from yield where run_id = ? order by dimension, value", [rid]),
            "cps": cps,
            "overall": next(r for r in cps if r["dimension"] == "overall"),
            "by_component": _rows(
                con,
                "select component, sum(usd) as usd, count(*) as rows from costs where run_id = ? "
                "group by component order by usd desc",
                [rid],
            ),
            "total_usd": con.execute("select coalesce(sum(usd), 0) from costs where run_id = ?", [rid]).fetchone()[0],
            "waste": _rows(con, "select * from waste where run_id = ?", [rid]),
            "saved": _rows(con, "select * from attempts_saved where run_id = ?", [rid])[0],
            "dropped": _rows(
                con,
                "select source, task_id, drop_stage, drop_reason, drop_detail, status from tasks "
                "where run_id = ? and status in ('dropped', 'quarantined') "
                "order by drop_stage, drop_reason, source, task_id limit ?",
                [rid, MAX_DROPPED_ROWS],
            ),
            "n_dropped": con.execute(
                "select count(*) from tasks where run_id = ? and status in ('dropped', 'quarantined')", [rid]
            ).fetchone()[0],
            "compare": _rows(
                con,
                "select run_id, model_id, learnable, spend_usd, usd_per_learnable from cost_per_useful_signal "
                "where dimension = 'overall' order by run_id",
            ),
            "selection": load_selection(con, rid),  # the run's latest `tasksieve select`, or None
            "judge": load_judge(con, rid),  # rubric judge agreement (report_judge.py), or None
        }
    finally:
        con.close()


def _esc(x) -> str:
    """HTML-escaped text of any value; None (a `dedup` run has no model, its
    kept tasks no drop stage) is empty, never a crash. Every value that goes
    into the page, in text or in a (double-quoted) attribute, passes here,
    numbers too: a delivery, a model or a file name chose many of them
    (tests/report/test_inert_pages.py)."""
    return html.escape("" if x is None else str(x))


def _usd(x) -> str:
    return "n/a" if x is None else f"${x:,.4f}" if abs(x) < 10 else f"${x:,.2f}"


def _pct(x) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


# --- terminal -------------------------------------------------------------


def _table(headers: list[str], rows: list[list]) -> list[str]:
    cells = [headers] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    line = lambda r: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
    return [line(headers), line(["-" * w for w in widths])] + [line(r) for r in cells[1:]]


def render_terminal(d: dict) -> str:
    o, s = d["overall"], d["saved"]
    out = [
        f"run {d['run']['run_id']}  model {d['run']['model_id']}",
        "",
        f"total spend {_usd(d['total_usd'])}   learnable {o['learnable']}   cost per useful signal "
        f"{_usd(o['usd_per_learnable'])} per learnable task, {_usd(o['usd_per_useful_pair'])} per pass/fail pair"
        + (f"   ({o['unpriced_tasks']} tasks unpriced)" if o["unpriced_tasks"] else ""),
        "",
    ]
    out += _table(
        ["stage", "in", "removed", "out", "spent on removed"],
        [[f["stage"], f["rows_in"], f["removed"], f["rows_out"], _usd(f["usd_removed"])] for f in d["funnel"]],
    )
    out += [""] + _table(
        ["source", "tasks", "learnable", "yield", "spend", "per learnable"],
        [
            [
                c["value"],
                y["tasks"],
                c["learnable"],
                _pct(y["learnable_share"]),
                _usd(c["spend_usd"]),
                _usd(c["usd_per_learnable"]),
            ]
            for c in d["cps"]
            if c["dimension"] == "source"
            for y in d["yield"]
            if y["dimension"] == "source" and y["value"] == c["value"]
        ],
    )
    out += [""] + _table(["component", "spend"], [[c["component"], _usd(c["usd"])] for c in d["by_component"]])
    out += [
        "",
        f"attempts used {s['attempts_used']} of {s['attempts_fixed_k']} with fixed k ({_pct(s['saved_share'])} saved)",
    ]
    out += selection_terminal(d["selection"]) if d.get("selection") else []
    out += judge_terminal(d["judge"]) if d.get("judge") else []
    return "\n".join(out)


# --- HTML -------------------------------------------------------------------


def _bars(chart_id: str, title: str, items: list[tuple[str, float]], fmt, vertical: bool = False) -> str:
    """A bar chart as inline SVG; one <rect class="bar"> per item."""
    e = _esc
    peak = max((v for _, v in items), default=0) or 1
    if vertical:
        w, h, pad = 560, 220, 28
        bw = (w - 2 * pad) / max(len(items), 1)
        parts = []
        for i, (label, v) in enumerate(items):
            bh = max((h - 2 * pad) * v / peak, 1.0 if v > 0 else 0.0)  # a non-zero value stays visible
            x, y = pad + i * bw, h - pad - bh
            parts.append(
                f'<rect class="bar" x="{x + 2:.1f}" y="{y:.1f}" width="{bw - 4:.1f}" height="{bh:.1f}" '
                f'data-label="{e(label)}" data-value="{e(v)}"><title>{e(label)}: {e(fmt(v))}</title></rect>'
                f'<text x="{x + bw / 2:.1f}" y="{h - 10}" text-anchor="middle">{e(label)}</text>'
                f'<text x="{x + bw / 2:.1f}" y="{y - 4:.1f}" text-anchor="middle">{e(fmt(v))}</text>'
            )
    else:
        w, row, left = 560, 26, 150
        h = 10 + row * len(items)
        parts = []
        for i, (label, v) in enumerate(items):
            bw = max((w - left - 110) * v / peak, 1.0 if v > 0 else 0.0)
            y = 5 + i * row
            parts.append(
                f'<text x="{left - 8}" y="{y + 16}" text-anchor="end">{e(label)}</text>'
                f'<rect class="bar" x="{left}" y="{y + 3}" width="{bw:.1f}" height="{row - 8}" '
                f'data-label="{e(label)}" data-value="{e(v)}"><title>{e(label)}: {e(fmt(v))}</title></rect>'
                f'<text x="{left + bw + 6:.1f}" y="{y + 16}">{e(fmt(v))}</text>'
            )
    return (
        f"<figure><figcaption>{e(title)}</figcaption>"
        f'<svg class="chart" id="{chart_id}" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" '
        f'aria-label="{e(title)}">{"".join(parts)}</svg></figure>'
    )


def _html_table(headers: list[str], rows: list[list], table_id: str) -> str:
    e = _esc
    head = "".join(f"<th>{e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f'<table id="{e(table_id)}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _evidence(detail: str | None) -> str:
    if not detail:
        return ""
    try:
        d = json.loads(detail)
    except json.JSONDecodeError:
        return detail
    if not isinstance(d, dict):
        return detail
    if "duplicate_of" in d:
        sim = f" (similarity {d['similarity']:.2f})" if "similarity" in d else ""
        return f"duplicate of {d.get('duplicate_of_source', '')}/{d['duplicate_of']}{sim}"
    if "pool_task_id" in d:
        return f"{d.get('match')} copy of pool item {d.get('pool_source')}/{d['pool_task_id']} (similarity {d.get('similarity')})"
    if "benchmark" in d:
        text = d.get("ngram") or d.get("matched_text", "")
        return f"{d['benchmark']} item {d.get('benchmark_item')} ({d.get('check', 'ngram')}): \u201c{text[:200]}\u201d"
    return ", ".join(f"{k}: {v}" for k, v in d.items())


CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1180px;color:#1b1f24;padding:0 16px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
.muted{color:#57606a} .cards{display:flex;gap:12px;flex-wrap:wrap;margin:16px 0}
.card{border:1px solid #d0d7de;border-radius:8px;padding:10px 14px;min-width:150px}
.card .figure{font-size:22px;font-weight:600;display:block}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(540px,1fr));gap:8px 24px}
figure{margin:0} figcaption{font-weight:600;margin:6px 0}
svg.chart text{font-size:11px;fill:#1b1f24} rect.bar{fill:#2f6fdb}
table{border-collapse:collapse;width:100%;margin:6px 0 14px} th,td{border-bottom:1px solid #eaeef2;padding:4px 8px;text-align:left}
th{background:#f6f8fa} td:not(:first-child){font-variant-numeric:tabular-nums}
"""

# Runs in the browser: records each chart's laid-out size, so a test can
# tell a chart that rendered from one that did not.
RENDER_PROBE = """
document.querySelectorAll('svg.chart').forEach(function (svg) {
  var box = svg.getBoundingClientRect();
  var bars = Array.prototype.filter.call(svg.querySelectorAll('rect.bar'), function (r) { return r.getBBox().width > 0 && r.getBBox().height > 0; });
  svg.setAttribute('data-rendered-width', Math.round(box.width));
  svg.setAttribute('data-rendered-height', Math.round(box.height));
  svg.setAttribute('data-rendered-bars', bars.length);
});
document.body.setAttribute('data-report-ready', 'yes');
"""


# Defence in depth: were a value ever to reach the page unescaped, the
# browser would still run no script but the probe above (by its hash), load
# nothing and submit nothing.
CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'none'; base-uri 'none'; "
    f"script-src 'sha256-{base64.b64encode(hashlib.sha256(RENDER_PROBE.encode()).digest()).decode()}'"
)


def _card(key: str, label: str, value, text: str) -> str:
    return (
        f'<div class="card"><span class="figure" data-key="{_esc(key)}" data-value="{_esc(value)}">'
        f'{_esc(text)}</span><span class="muted">{_esc(label)}</span></div>'
    )


def render_html(d: dict) -> str:
    e = _esc
    run, o, s = d["run"], d["overall"], d["saved"]
    counts = {k: run.get(f"n_{k}") for k in ("learnable", "all_pass", "all_fail", "dropped", "quarantined")}
    cards = "".join(
        [
            _card("total_usd", "total spend", d["total_usd"], _usd(d["total_usd"])),
            _card("learnable", "learnable tasks", o["learnable"], str(o["learnable"])),
            _card(
                "usd_per_learnable",
                "cost per useful signal (per learnable task)",
                o["usd_per_learnable"],
                _usd(o["usd_per_learnable"]),
            ),
            _card(
                "usd_per_useful_pair", "per pass/fail pair", o["usd_per_useful_pair"], _usd(o["usd_per_useful_pair"])
            ),
            _card("rows_in", "rows in", run["rows_in"], str(run["rows_in"])),
            _card(
                "attempts_saved",
                "attempts saved vs fixed k",
                s["attempts_saved"],
                f"{s['attempts_saved']} ({_pct(s['saved_share'])})",
            ),
            _card(
                "unpriced_tasks", "tasks without any cost information", o["unpriced_tasks"], str(o["unpriced_tasks"])
            ),
        ]
    )
    by_source = [(c["value"], c) for c in d["cps"] if c["dimension"] == "source"]
    by_batch = [(c["value"], c) for c in d["cps"] if c["dimension"] == "batch"]
    yield_of = {(y["dimension"], y["value"]): y for y in d["yield"]}
    waste_by_stage: dict[str, float] = {}
    for w in d["waste"]:
        stage = w["stage"] or w["status"]  # `dedup` runs: kept tasks have no drop stage
        waste_by_stage[stage] = waste_by_stage.get(stage, 0.0) + (w["usd"] or 0.0)
    charts = "".join(
        [
            _bars(
                "chart-funnel",
                "Funnel: tasks left after each stage",
                [(f["stage"], f["rows_out"]) for f in d["funnel"]],
                str,
            ),
            _bars(
                "chart-pass-rate",
                "Pass rate of sampled tasks",
                [(f"{h['bin_lo']:.1f}", h["tasks"]) for h in d["hist"]],
                str,
                vertical=True,
            ),
            _bars(
                "chart-cost-component",
                "Spend by component",
                [(c["component"], c["usd"]) for c in d["by_component"]],
                _usd,
            ),
            _bars("chart-cost-stage", "Spend on tasks removed, by stage", list(waste_by_stage.items()), _usd),
            _bars(
                "chart-cps-source",
                "Cost per learnable task, by source",
                [(k, c["usd_per_learnable"] or 0.0) for k, c in by_source],
                _usd,
            ),
            _bars(
                "chart-yield-source",
                "Learnable share, by source",
                [(k, yield_of[("source", k)]["learnable_share"] or 0.0) for k, _ in by_source],
                _pct,
            ),
        ]
    )
    # Slices with no task (e.g. the batch of rows quarantined before they had one) are left out.
    slice_rows = lambda items, dim: [
        [
            k,
            yield_of[(dim, k)]["tasks"],
            c["learnable"],
            _pct(yield_of[(dim, k)]["learnable_share"]),
            _usd(c["spend_usd"]),
            _usd(c["usd_per_learnable"]),
            _usd(c["usd_per_useful_pair"]),
        ]
        for k, c in items
        if yield_of[(dim, k)]["tasks"]
    ]
    headers = ["", "tasks", "learnable", "yield", "spend", "per learnable", "per pass/fail pair"]
    waste_rows = [[w["stage"], w["reason"] or "", w["status"], w["tasks"], _usd(w["usd"])] for w in d["waste"]]
    dropped_rows = [
        [
            r["drop_stage"],
            r["drop_reason"],
            f"{r['source'] or ''}/{r['task_id'] or '(no id)'}",
            _evidence(r["drop_detail"]),
        ]
        for r in d["dropped"]
    ]
    more = d["n_dropped"] - len(d["dropped"])
    compare = _html_table(
        ["run", "model", "learnable", "spend", "per learnable"],
        [
            [c["run_id"], c["model_id"], c["learnable"], _usd(c["spend_usd"]), _usd(c["usd_per_learnable"])]
            for c in d["compare"]
        ],
        "table-runs",
    )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="Content-Security-Policy" content="{e(CSP)}"><title>tasksieve report {e(run["run_id"])}</title>
<style>{CSS}</style></head><body>
<h1>Where the money went</h1>
<div class="muted">run {e(run["run_id"])} &middot; model {e(run["model_id"])} &middot; {e(str(run["started_at"]))} &middot;
{e(counts["learnable"])} learnable, {e(counts["all_pass"])} all-pass, {e(counts["all_fail"])} all-fail, {e(counts["dropped"])} dropped, {e(counts["quarantined"])} quarantined</div>
<div class="cards">{cards}</div>
<div class="grid">{charts}</div>
<h2>Yield and cost per useful signal, by source</h2>{_html_table(["source"] + headers[1:], slice_rows(by_source, "source"), "table-source")}
<h2>By batch</h2>{_html_table(["batch"] + headers[1:], slice_rows(by_batch, "batch"), "table-batch")}
<h2>Waste: spend on tasks that did not become learnable</h2>{_html_table(["stage", "reason", "status", "tasks", "spend"], waste_rows, "table-waste")}
<h2>Dropped and quarantined items, with evidence</h2>{_html_table(["stage", "reason", "task", "evidence"], dropped_rows, "table-dropped")}
{f'<p class="muted">and {more} more: see the drops and quarantine tables.</p>' if more > 0 else ""}
{selection_html(d["selection"], _bars, _html_table, _card) if d.get("selection") else ""}{judge_section(d)}
<h2>Runs in this database</h2>{compare}
<p class="muted">Spend = every cost row of the run (expert cost of every task that entered, dropped ones included;
generation and verification of every attempt). Cost per useful signal = spend / learnable tasks.</p>
<script>{RENDER_PROBE}</script>
</body></html>
"""


def judge_section(d: dict) -> str:
    return judge_html(d["judge"], _bars, _html_table) if d.get("judge") else ""


def write_report(out: Path, run_id: str | None = None) -> tuple[Path, str]:
    data = load_report_data(visible(out, "curation.duckdb"), run_id)
    # A fresh temporary file renamed over report.html: a link planted there
    # is replaced, never written through.
    path = write_text_atomic(out / "report.html", render_html(data))
    return path, render_terminal(data)
