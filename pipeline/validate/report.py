"""How a validation summary is shown: a terminal table whose last line is
the verdict, and a self-contained HTML report a vendor can send to the
buyer (inline CSS, no scripts, no CDN: it opens the same offline)."""

from __future__ import annotations

import html
import json
from pathlib import Path

# The report lists this many offenders per check; summary.json has them all.
HTML_OFFENDERS = 200


def _fmt(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _first_offenders(check: dict, n: int = 3) -> str:
    offs = check["offenders"]
    if not offs:
        return ""
    names = [o["task_id"] or o["where"] for o in offs[:n]]
    more = f" +{len(offs) - n} more" if len(offs) > n else ""
    return ", ".join(str(x) for x in names) + more


def render_table(summary: dict, out_dir: Path) -> str:
    rows = [("CHECK", "OBSERVED", "THRESHOLD", "RESULT", "OFFENDERS")]
    for c in summary["checks"]:
        rows.append((c["name"], _fmt(c["observed"]), c["threshold"], c["status"].upper(), _first_offenders(c)))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = [
        f"tasksieve validate: {summary['delivery']['rows_read']} rows read, "
        f"{summary['delivery']['valid_tasks']} valid tasks"
    ]
    for r in rows:
        lines.append("  ".join(r[i].ljust(widths[i]) for i in range(4)) + "  " + r[4])
    probe = next((c for c in summary["checks"] if c["name"] == "learnable_share"), None)
    if probe and probe["details"].get("probed"):
        d = probe["details"]
        lines.append(
            f"probe: {d['probed']} tasks x k={d['k']} with {d['model_id']}: "
            f"learnable {d['shares']['learnable']:.0%}, all_pass {d['shares']['all_pass']:.0%}, "
            f"all_fail {d['shares']['all_fail']:.0%}; {d['prompt_tokens']} prompt + "
            f"{d['completion_tokens']} completion tokens"
        )
    lines.append(
        f"details: {out_dir / 'summary.json'}, {out_dir / 'report.html'}"
        + (f", {summary['data_docs']['index']}" if summary["data_docs"].get("built") else "")
    )
    n = len(summary["failed_checks"])
    lines.append("VERDICT: ACCEPTABLE" if n == 0 else f"VERDICT: NOT ACCEPTABLE ({n} check{'s' * (n != 1)} failed)")
    return "\n".join(lines)


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2rem auto;max-width:72rem;
color:#222;padding:0 1rem;line-height:1.4}
h1{font-size:1.5rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;width:100%;margin:.5rem 0;font-size:.9rem}
th,td{border:1px solid #ddd;padding:.3rem .5rem;text-align:left;vertical-align:top}
th{background:#f4f4f4}.pass{color:#17692f;font-weight:600}.fail{color:#b00020;font-weight:600}
.skipped{color:#777}.verdict{font-size:1.3rem;padding:.6rem 1rem;border-radius:4px;display:inline-block}
.ok{background:#e3f5e8;color:#17692f}.bad{background:#fde7ea;color:#b00020}
code{background:#f4f4f4;padding:0 .2rem}.muted{color:#666;font-size:.85rem}
"""


def _e(x) -> str:
    """Escaped text of any value, for text and for (single-quoted)
    attributes: html.escape escapes both quotes. Every value on the page
    passes here; a delivery chose most of them (tests/report/test_inert_pages.py)."""
    return html.escape(_fmt(x) if not isinstance(x, str) else x)


def render_html(summary: dict) -> str:
    ok = summary["acceptable"]
    d = summary["delivery"]
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        # No script at all, nothing loaded: defence in depth behind the escaping.
        "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; style-src 'unsafe-inline'; "
        "img-src data:; form-action 'none'; base-uri 'none'\">",
        "<title>Delivery validation report</title><style>",
        _CSS,
        "</style></head><body>",
        "<h1>Delivery validation report</h1>",
        f"<p class='verdict {'ok' if ok else 'bad'}'>VERDICT: {_e(summary['verdict'])}"
        + ("" if ok else f" ({len(summary['failed_checks'])} checks failed)")
        + "</p>",
        "<p>",
        f"Inputs: {', '.join('<code>' + _e(p) + '</code>' for p in d['inputs'])}<br>",
        f"Rows read: {_e(d['rows_read'])}; parsed: {_e(d['rows_parsed'])}; valid tasks: {_e(d['valid_tasks'])} "
        f"({_e(json.dumps(d['domains']))})<br>",
        f"Pool (--against): {_e(', '.join(summary['against'])) if summary['against'] else 'none'}<br>",
        f"Profile: <code>{_e(summary['profile']['path'])}</code><br>",
        f"Generated {_e(summary['generated_at'])} by tasksieve {_e(summary['tasksieve_version'])}</p>",
        "<h2>Checks</h2><table><tr><th>check</th><th>what it counts</th><th>observed</th><th>threshold</th>"
        "<th>result</th><th>offenders</th></tr>",
    ]
    for c in summary["checks"]:
        parts.append(
            f"<tr><td><a href='#{_e(c['name'])}'>{_e(c['name'])}</a></td><td>{_e(c['description'])}</td>"
            f"<td>{_e(c['observed'])}</td><td>{_e(c['threshold'])}</td>"
            f"<td class='{_e(c['status'])}'>{_e(c['status'].upper())}</td><td>{len(c['offenders'])}</td></tr>"
        )
    parts.append("</table>")
    for c in summary["checks"]:
        parts.append(
            f"<h2 id='{_e(c['name'])}'>{_e(c['name'])}: <span class='{_e(c['status'])}'>"
            f"{_e(c['status'].upper())}</span></h2><p>{_e(c['description'])}. Observed {_e(c['observed'])}, "
            f"threshold {_e(c['threshold'])}.</p>"
        )
        if c["details"]:
            parts.append(f"<p class='muted'>{_e(json.dumps(c['details'], default=str, ensure_ascii=False))}</p>")
        if c["offenders"]:
            parts.append("<table><tr><th>task_id</th><th>where (file:line)</th><th>reason</th></tr>")
            for o in c["offenders"][:HTML_OFFENDERS]:
                parts.append(
                    f"<tr><td>{_e(o['task_id'])}</td><td><code>{_e(o['where'])}</code></td>"
                    f"<td>{_e(o['reason'])}</td></tr>"
                )
            parts.append("</table>")
            if len(c["offenders"]) > HTML_OFFENDERS:
                parts.append(f"<p class='muted'>{len(c['offenders']) - HTML_OFFENDERS} more in summary.json.</p>")
    parts.append("<h2>Notes and limitations</h2><ul>")
    parts += [f"<li>{_e(n)}</li>" for n in summary["notes"]]
    parts.append("</ul></body></html>\n")
    return "".join(parts)
