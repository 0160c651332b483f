"""The report's difficulty-prediction section (`predicted` sampling): how
well the pass rate predicted before a task's first attempt
(`tasks.predicted_pass_rate`, transforms/sample/difficulty.py) matched the
pass rate realised (`tasks.pass_rate`): Brier score beside that of a
constant prediction (the run's mean), and reliability bins."""

from __future__ import annotations

from tasksieve.transforms.sample.difficulty import calibration


def load_calibration(con, run_id: str) -> dict | None:
    """None when the run predicted nothing (another mode, an older file)."""
    has_column = con.execute(
        "select count(*) from information_schema.columns where table_name = 'tasks' "
        "and column_name = 'predicted_pass_rate'"
    ).fetchone()[0]
    if not has_column:
        return None
    rows = con.execute(
        "select predicted_pass_rate, pass_rate from tasks where run_id = ? and "
        "predicted_pass_rate is not null and pass_rate is not null",
        [run_id],
    ).fetchall()
    if not rows:
        return None
    return calibration([r[0] for r in rows], [r[1] for r in rows])


def calibration_lines(c: dict) -> list[str]:
    return [
        "",
        f"difficulty predicted before sampling, {c['n']} tasks: Brier {c['brier']:.3f} against the realised "
        f"pass rate ({c['brier_constant']:.3f} for a constant prediction; lower is better)",
    ]


def calibration_terminal(c: dict) -> list[str]:
    rows = [
        [f"{b['bin_lo']:.1f}-{b['bin_hi']:.1f}", str(b["n"]), f"{b['predicted']:.2f}", f"{b['realised']:.2f}"]
        for b in c["bins"]
    ]
    head = ["predicted", "tasks", "mean predicted", "mean realised"]
    widths = [max(len(r[i]) for r in [head] + rows) for i in range(4)]
    line = lambda r: "  ".join(x.ljust(w) if i == 0 else x.rjust(w) for i, (x, w) in enumerate(zip(r, widths)))
    return calibration_lines(c) + [line(head)] + [line(r) for r in rows]


def calibration_html(c: dict, html_table) -> str:
    import html

    rows = [
        [f"{b['bin_lo']:.1f}-{b['bin_hi']:.1f}", b["n"], f"{b['predicted']:.2f}", f"{b['realised']:.2f}"]
        for b in c["bins"]
    ]
    return f"<h2>Difficulty predicted before sampling</h2><p>{html.escape(calibration_lines(c)[1])}</p>" + html_table(
        ["predicted", "tasks", "mean predicted", "mean realised"], rows, "table-calibration"
    )
