"""GX's Data Docs made to open offline, as a vendor sends them.

GX writes pages that load Bootstrap, jQuery, bootstrap-table, Vega and
fonts from public CDNs, and its index lists the validation results in a
table that bootstrap-table fills in with JavaScript: offline, the pages
opened unstyled and the index linked to no result. After GX has built
them (pipeline/validate/command.py), every page is rewritten:

- every remote asset (a `<script src>`, `<link href>` or `<img src>` on
  http(s), the stylesheets' remote `url(...)`) and every script is
  removed: the content is static HTML, nothing is fetched or run;
- a small stylesheet is inlined for what Bootstrap laid out, beside GX's
  own bundled one (static/styles/), and a Content-Security-Policy that lets
  a page load only files of its own folder;
- the index gains a plain list of links to every validation result and
  expectation suite page; each page a link back to the index.
"""

from __future__ import annotations

import html
import os
import re
from pathlib import Path

# Nothing from the network, no script: files of the docs folder and inline styles only.
CSP = (
    "default-src 'none'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; font-src 'self'; "
    "base-uri 'none'; form-action 'none'"
)

_REMOTE = r"""["']?\s*(?:https?:)?//"""
_SCRIPT = re.compile(r"<script\b[^>]*>.*?</script\s*>", re.S | re.I)
_REMOTE_LINK = re.compile(r"<link\b[^>]*\bhref\s*=\s*" + _REMOTE + r"[^>]*>", re.S | re.I)
_REMOTE_IMG = re.compile(r"<img\b[^>]*\bsrc\s*=\s*" + _REMOTE + r"[^>]*>", re.S | re.I)
_REMOTE_URL = re.compile(r"url\(\s*" + _REMOTE + r"[^)]*\)", re.I)
_HEAD = re.compile(r"<head\b[^>]*>", re.I)
_BODY = re.compile(r"<body\b[^>]*>", re.I)

_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:0 auto;max-width:80rem;
padding:0 1rem;color:#222;line-height:1.4}
table{border-collapse:collapse;margin:.5rem 0;font-size:.9rem}th,td{border:1px solid #ddd;padding:.25rem .5rem;
vertical-align:top;text-align:left}.d-none,.modal,.tooltip{display:none}
.tasksieve-docs-nav{background:#f4f6f8;border:1px solid #dde;padding:.5rem 1rem;margin:1rem 0}
.tasksieve-docs-nav li{margin:.2rem 0}
"""


def _clean(text: str) -> str:
    text = _SCRIPT.sub("", text)
    text = _REMOTE_LINK.sub("", text)
    text = _REMOTE_IMG.sub("", text)
    head = f'<meta http-equiv="Content-Security-Policy" content="{html.escape(CSP)}"><style>{_STYLE}</style>'
    text, n = _HEAD.subn(lambda m: m.group(0) + head, text, count=1)
    if not n:
        text = head + text
    return text


def _nav(items: list[tuple[str, str]], title: str) -> str:
    links = "".join(f'<li><a href="{html.escape(href)}">{html.escape(label)}</a></li>' for href, label in items)
    return f'<nav class="tasksieve-docs-nav" id="tasksieve-docs-nav"><strong>{html.escape(title)}</strong><ul>{links}</ul></nav>'


def _with_nav(text: str, nav: str) -> str:
    text, n = _BODY.subn(lambda m: m.group(0) + nav, text, count=1)
    return text if n else nav + text


def _pages(root: Path, sub: str) -> list[Path]:
    base = root / sub
    if not base.is_dir() or base.is_symlink():
        return []
    found = []
    for folder, dirs, files in os.walk(base):  # GX's own tree, built moments ago in a private folder
        dirs.sort()
        found += [Path(folder) / f for f in sorted(files) if f.endswith(".html")]
    return found


def _label(page: Path, root: Path) -> str:
    parts = page.relative_to(root).with_suffix("").parts
    if parts[0] == "validations":
        return "validation result: " + " / ".join(p for p in parts[1:] if p != "__none__")
    return "expectation suite: " + " / ".join(parts[1:])


def make_offline(root: Path) -> list[Path]:
    """Rewrite every page under `root` (the built Data Docs); returns the
    result and suite pages the index now links to."""
    results = _pages(root, "validations")
    suites = _pages(root, "expectations")
    for css in sorted((root / "static" / "styles").glob("*.css")) if (root / "static" / "styles").is_dir() else []:
        css.write_text(_REMOTE_URL.sub("none", css.read_text(encoding="utf-8")), encoding="utf-8")
    index = root / "index.html"
    items = [(p.relative_to(root).as_posix(), _label(p, root)) for p in results + suites]
    if index.is_file():
        text = _clean(index.read_text(encoding="utf-8"))
        index.write_text(_with_nav(text, _nav(items, "Validation results and expectation suites")), encoding="utf-8")
    for page in results + suites:
        back = os.path.relpath(index, page.parent).replace(os.sep, "/")
        text = _clean(page.read_text(encoding="utf-8"))
        page.write_text(_with_nav(text, _nav([(back, "index of these Data Docs")], "tasksieve")), encoding="utf-8")
    return results + suites
