"""The report's rubric-judge section: one plain line (which judge, its
kappa against the graders, on how many rubric tasks it could not be
trusted, how to point [judge] elsewhere), the pooled agreement table, a
chart of kappa by source and judge, and the per-task table
(table `judge_agreement`, transforms/verify/judge/store.py)."""

from __future__ import annotations

import html

MAX_TASK_ROWS = 200


def _rows(con, sql: str, params=()) -> list[dict]:
    cur = con.execute(sql, list(params))
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


def load_judge(con, run_id: str) -> dict | None:
    """The run's judge agreement, or None (no table, or no rubric task)."""
    have = con.execute(
        "select count(*) from information_schema.tables where table_name = 'judge_agreement'"
    ).fetchone()[0]
    if not have:
        return None
    tasks = _rows(
        con,
        "select * from judge_agreement where run_id = ? and scope = 'task' order by source, task_id limit ?",
        [run_id, MAX_TASK_ROWS],
    )
    if not tasks:
        return None
    pooled = _rows(
        con,
        "select * from judge_agreement where run_id = ? and task_id is null "
        "order by scope, scope_value, judge_model_id",
        [run_id],
    )
    counts = _rows(
        con,
        "select judge_model_id, count(*) as tasks, count(*) filter (where verdict in ('trusted', "
        "'unmeasured')) as kept, count(*) filter (where verdict = 'unmeasured') as unmeasured, "
        "avg(self_agreement) as self_agreement "
        "from judge_agreement where run_id = ? and scope = 'task' group by judge_model_id",
        [run_id],
    )
    # What the gate saved, estimated as in the run's summary: each dropped task
    # at k attempts, at the run's mean cost of a rubric attempt (else of any attempt).
    per_attempt = con.execute(
        "with a as (select c.content_hash, c.attempt_idx, sum(c.usd) as usd, bool_or(t.domain = 'rubric') as rubric "
        "from costs c left join (select distinct content_hash, domain from tasks where run_id = ?) t "
        "using (content_hash) where c.run_id = ? and c.attempt_idx is not null group by all) "
        "select coalesce(avg(usd) filter (where rubric), avg(usd)) from a",
        [run_id, run_id],
    ).fetchone()[0]
    k = con.execute("select k from runs where run_id = ?", [run_id]).fetchone()
    dropped = sum(c["tasks"] - c["kept"] for c in counts)
    saved = dropped * k[0] * per_attempt if k and k[0] and per_attempt is not None else None
    return {
        "tasks": tasks,
        "pooled": pooled,
        "counts": counts,
        "saved_usd": saved,
        "saved_attempts": dropped * k[0] if k and k[0] else None,
    }


def judge_lines(j: dict) -> list[str]:
    """The plain statement, one line per judge."""
    overall = {p["judge_model_id"]: p for p in j["pooled"] if p["scope"] == "all"}
    lines = []
    for c in j["counts"]:
        o = overall.get(c["judge_model_id"])
        kappa = (
            "agreement unmeasured (no graded attempts)"
            if o is None or o["kappa"] is None
            else f"kappa {o['kappa']:.2f} against the graders on {o['n_labels']} labels"
        )
        if c["self_agreement"] is not None:
            kappa += f" (self-agreement {c['self_agreement']:.2f} with the criteria reordered)"
        untrusted = c["tasks"] - c["kept"]
        line = (
            f"rubric judge {c['judge_model_id']}: {kappa}; not trusted on {untrusted} of {c['tasks']} rubric "
            f"tasks (dropped before sampling)"
        )
        if c["unmeasured"]:
            line += f"; {c['unmeasured']} judged with agreement unmeasured"
        if untrusted or c["unmeasured"]:
            line += (
                '; for a better judge set [judge] path = "MODEL_DIR", or backend = "openai" with '
                "[judge.openai] base_url and model"
            )
        lines.append(line)
    if j.get("saved_usd") and lines:
        lines.append(
            f"the judge gate saved ~${j['saved_usd']:.4f}: {j['saved_attempts']} attempts not sampled "
            "(dropped tasks x k, at this run's mean cost of an attempt)"
        )
    return lines


def _f(x, fmt="{:.2f}") -> str:
    return "" if x is None else fmt.format(x)


def judge_terminal(j: dict) -> list[str]:
    return [""] + judge_lines(j)


def judge_html(j: dict, bars, html_table) -> str:
    e = lambda x: html.escape("" if x is None else str(x))
    pooled = [
        [
            p["scope"],
            p["scope_value"],
            p["judge_model_id"],
            p["n_labels"],
            _f(p["agreement"]),
            _f(p["kappa"]),
            f"{_f(p['kappa_lo'])}..{_f(p['kappa_hi'])}" if p["kappa_lo"] is not None else "",
            p["verdict"],
        ]
        for p in j["pooled"]
    ]
    tasks = [
        [
            f"{t['source'] or ''}/{t['task_id']}",
            t["judge_model_id"],
            t["n_labels"],
            _f(t["agreement"]),
            _f(t["kappa"]),
            _f(t["self_agreement"]),
            t["verdict"],
        ]
        for t in j["tasks"]
    ]
    chart = bars(
        "chart-judge-kappa",
        "Judge kappa against graders, by source and judge",
        [
            (f"{p['scope_value']} / {p['judge_model_id']}", max(0.0, p["kappa"]))
            for p in j["pooled"]
            if p["scope"] == "source" and p["kappa"] is not None
        ],
        lambda x: f"{x:.2f}",
    )
    return (
        "<h2>Rubric judge: agreement with people</h2>"
        + "".join(f'<p class="judge-line">{e(line)}</p>' for line in judge_lines(j))
        + chart
        + html_table(
            ["scope", "group", "judge", "labels", "agreement", "kappa", "95% interval", "verdict"],
            pooled,
            "table-judge-pooled",
        )
        + html_table(
            ["task", "judge", "labels", "agreement", "kappa", "self-agreement", "verdict"], tasks, "table-judge-tasks"
        )
    )
