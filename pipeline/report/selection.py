"""The selection section of `tasksieve report`: the latest `tasksieve
select` of the reported run, from the tables `selections`, `selection` and
`selection_clusters` (pipeline/select/command.py).

Selected vs pool by cluster (with representative prompts), difficulty band
and source; the selection's signal per dollar against random subsets of
the same size; where to buy next; graduated tasks. The page's own helpers
(bar chart, table, card) are passed in by pipeline/report/command.py, so this
module does not import it and the two look alike.
"""

from __future__ import annotations

import html
import json

TOP_ROWS = 50


def _rows(con, sql: str, params=()) -> list[dict]:
    cur = con.execute(sql, list(params))
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


def _by(con, sid: str, column: str) -> list[dict]:
    return _rows(
        con,
        f"""
        SELECT coalesce(CAST({column} AS VARCHAR), '(none)') AS value,
               count(*) FILTER (WHERE NOT graduated) AS pool, count(*) FILTER (WHERE selected) AS selected,
               coalesce(sum(value) FILTER (WHERE selected), 0) AS signal
        FROM selection WHERE selection_id = ? GROUP BY 1 ORDER BY 1""",
        [sid],
    )


def load_selection(con, run_id: str) -> dict | None:
    """The run's latest selection, or None when it has none."""
    names = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    if not {"selections", "selection", "selection_clusters"} <= names:
        return None
    found = _rows(
        con, "SELECT * FROM selections WHERE run_id = ? ORDER BY created_at DESC, selection_id DESC LIMIT 1", [run_id]
    )
    if not found:
        return None
    sid = found[0]["selection_id"]
    return {
        "summary": found[0],
        "clusters": _rows(con, "SELECT * FROM selection_clusters WHERE selection_id = ? ORDER BY cluster", [sid]),
        "by_band": _by(con, sid, "difficulty"),
        "by_source": _by(con, sid, "source"),
        "top": _rows(
            con,
            "SELECT rank, source, task_id, cluster, pass_rate, p_shrunk, value, marginal_value, price_usd, "
            "reason FROM selection WHERE selection_id = ? AND selected ORDER BY rank LIMIT ?",
            [sid, TOP_ROWS],
        ),
        "graduated": _rows(
            con,
            "SELECT source, task_id, reason FROM selection WHERE selection_id = ? AND graduated "
            "ORDER BY task_id, source",
            [sid],
        ),
    }


def _num(x, digits: int = 4) -> str:
    return "n/a" if x is None else f"{x:,.{digits}g}"


def selection_terminal(sel: dict) -> list[str]:
    s = sel["summary"]
    return [
        "",
        f"selection {s['selection_id']}: {s['n_selected']} of {s['n_pool']} tasks, signal "
        f"{s['selected_value']:.3f} vs {s['random_value']:.3f} random; signal per dollar "
        f"{_num(s['signal_per_usd'])} vs {_num(s['random_signal_per_usd'])}; clusters "
        f"{s['clusters_covered']} of {s['clusters']}",
    ]


def _cluster_rows(sel: dict) -> list[list]:
    rows = []
    for c in sel["clusters"]:
        reps = " | ".join(r["prompt"][:90] for r in json.loads(c["representatives"] or "[]"))
        cost = "unknown" if c["expert_usd_per_task"] is None else f"${c['expert_usd_per_task']:,.2f}"
        rows.append(
            [c["cluster"], c["tasks"], c["selected"], f"{c['mean_value']:.3f}", cost, c["buy_next_rank"] or "", reps]
        )
    return rows


def selection_html(sel: dict, bars, table, card) -> str:
    """The section; `bars`, `table`, `card` are report.py's renderers."""
    s = sel["summary"]
    cards = "".join(
        [
            card("select_n", "tasks selected", s["n_selected"], f"{s['n_selected']} of {s['n_pool']}"),
            card("select_signal", "summed signal (value)", s["selected_value"], f"{s['selected_value']:.3f}"),
            card(
                "select_random_signal", "random subsets of the same size", s["random_value"], f"{s['random_value']:.3f}"
            ),
            card("select_signal_per_usd", "signal per dollar", s["signal_per_usd"], _num(s["signal_per_usd"])),
            card(
                "select_random_signal_per_usd",
                "signal per dollar, random subsets",
                s["random_signal_per_usd"],
                _num(s["random_signal_per_usd"]),
            ),
            card(
                "select_clusters_covered",
                "clusters covered",
                s["clusters_covered"],
                f"{s['clusters_covered']} of {s['clusters']}",
            ),
        ]
    )
    charts = "".join(
        [
            bars(
                "chart-select-cluster",
                "Selected tasks, by cluster",
                [(f"cluster {c['cluster']}", c["selected"]) for c in sel["clusters"]],
                str,
            ),
            bars(
                "chart-select-per-usd",
                "Signal per dollar: selection vs random subsets of the same size",
                [("selection", s["signal_per_usd"] or 0.0), ("random subset", s["random_signal_per_usd"] or 0.0)],
                _num,
            ),
        ]
    )
    slice_rows = lambda rows: [[r["value"], r["pool"], r["selected"], f"{r['signal']:.3f}"] for r in rows]
    top = [
        [
            r["rank"],
            f"{r['source']}/{r['task_id']}",
            r["cluster"],
            f"{r['pass_rate']:.3f}",
            f"{r['value']:.4f}",
            f"{r['marginal_value']:.4f}",
            f"${r['price_usd']:,.5f}",
            r["reason"],
        ]
        for r in sel["top"]
    ]
    graduated = [[f"{g['source']}/{g['task_id']}", g["reason"]] for g in sel["graduated"]]
    graduated_html = ""
    if graduated:
        graduated_table = table(["task", "reason"], graduated, "table-select-graduated")
        graduated_html = f"<h3>Graduated: all_pass under the current model</h3>{graduated_table}"
    budget = f"{s['budget']:g} tasks" if s["budget_kind"] == "tasks" else f"${s['budget']:,.4f}"
    return f"""<h2 id="selection">Selection {html.escape(s["selection_id"])}: {s["n_selected"]} tasks under a budget of
{html.escape(budget)}</h2>
<p class="muted">{html.escape(s["value_formula"])}; pool mean pass rate {s["prior_mean"]:.3f}; stopped: {html.escape(s["stopped"])}.</p>
<div class="cards">{cards}</div>
<div class="grid">{charts}</div>
<h3>Selected vs pool, by cluster (representative prompts; buy next = 1 first)</h3>
{table(["cluster", "pool", "selected", "mean value", "expert cost per task", "buy next", "representative prompts"], _cluster_rows(sel), "table-select-cluster")}
<h3>By difficulty band</h3>{table(["difficulty", "pool", "selected", "signal"], slice_rows(sel["by_band"]), "table-select-band")}
<h3>By source</h3>{table(["source", "pool", "selected", "signal"], slice_rows(sel["by_source"]), "table-select-source")}
<h3>The selection, in the order chosen (first {TOP_ROWS})</h3>
{table(["rank", "task", "cluster", "pass rate", "value", "marginal value", "price", "reason"], top, "table-select-top")}
{graduated_html}
"""
