"""Hostile payloads for every HTML page the tool writes, and the check that
a page rendered them as text: open it in headless Chromium, let its
scripts and event handlers run, dump the DOM and look for what a payload
would leave had it become markup.

Each payload that could run script sets document.title to a marker built
at run time ('PWN' + 'ED'), so the marker itself never appears in a page
unless a payload ran. Payloads that inject markup carry 'PWN' in an event
handler, a URL, a script or a style: the DOM check finds those even when
the browser never fires them (a mouseover, say).
"""

from __future__ import annotations

import html.parser
import shutil
import subprocess
from pathlib import Path

RUN = "document.title='PWN'+'ED'"
PAYLOADS = [
    f"<script>{RUN}</script>",
    f'<img src=x onerror="{RUN}">',
    f"<svg onload={RUN}>",
    f"<svg><script>{RUN}</script></svg>",
    f'<body onload="{RUN}">',
    f'<input autofocus onfocus="{RUN}">',
    f'<details open ontoggle="{RUN}">',
    f"javascript:{RUN}",
    f'<a href="javascript:{RUN}">click PWN</a>',
    f'<iframe srcdoc="<script>parent.{RUN}</script>"></iframe>',
    f'<meta http-equiv="refresh" content="0;url=javascript:{RUN}">',
    f'" onmouseover="{RUN}" x="',
    f"' onmouseover='{RUN}' x='",
    f'"><img src=x onerror={RUN}>',
    f"'><img src=x onerror={RUN}>",
    f"</style><script>{RUN}</script>",
    f"</textarea><script>{RUN}</script>",
    f"</title><script>{RUN}</script>",
    f"</script><script>{RUN}</script>",
    f"<!--<script>{RUN}</script>-->",
    "<style>body{background:url(javascript:PWN)}</style>",
    f"]]><script>{RUN}</script>",
    "{{'PWN'+'ED'}}",
    "{{ 'PWN' ~ 'ED' }}",
    "${'PWN'+'ED'}",
    "<%= 'PWN'+'ED' %>",
    "{{constructor.constructor('document.title=\\'PWN\\'+\\'ED\\'')()}}",
    "$PARAMETER $styling $template ${template}",
    f"&lt;script&gt;{RUN}&lt;/script&gt;",
    f"&#60;img src=x onerror={RUN}&#62;",
]
# Payloads a file name can hold (no '/').
FILE_NAME_PAYLOADS = [p for p in PAYLOADS if "/" not in p and len(p) < 120]

_URL_ATTRS = {
    "href",
    "src",
    "srcdoc",
    "action",
    "formaction",
    "xlink:href",
    "data",
    "content",
    "background",
    "poster",
    "style",
    "srcset",
    "http-equiv",
}


class _Finder(html.parser.HTMLParser):
    """Markup a payload left: an event handler or URL carrying its marker,
    a javascript: URL, a script or style holding its marker."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self._in: list[str] = []

    def handle_starttag(self, tag, attrs):
        if "pwn" in tag.lower():
            self.found.append(f"<{tag}>")
        for name, value in attrs:
            value = value or ""
            name = name.lower()
            safe = name.startswith(("data-", "aria-")) or name in ("title", "alt", "class", "id")
            if "pwn" in name or ("PWN" in value and not safe):
                self.found.append(f"<{tag} {name}={value[:80]!r}>")
            if name in _URL_ATTRS and value.strip().lower().startswith(("javascript:", "vbscript:", "data:text/html")):
                self.found.append(f"<{tag} {name}={value[:80]!r}>")
        if tag in ("script", "style"):
            self._in.append(tag)

    def handle_endtag(self, tag):
        if self._in and tag == self._in[-1]:
            self._in.pop()

    def handle_data(self, data):
        if self._in and "PWN" in data:
            self.found.append(f"<{self._in[-1]}>{data[:80]!r}")


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        import pytest

        pytest.fail(
            "chromium is not installed: scripts/test.sh installs the Debian packages chromium and chromium-driver"
        )
    return exe


def dump_dom(page: Path, profile: Path) -> str:
    """The page's DOM after its scripts ran (and a few seconds of its timers)."""
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--virtual-time-budget=3000",
        f"--user-data-dir={profile}",
    ]
    return subprocess.run(
        [chromium(), *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120
    ).stdout


def injected(dom: str) -> list[str]:
    """What payloads did to a dumped DOM: empty when every one stayed text."""
    found = ["a payload ran (marker in the DOM)"] if "PWNED" in dom else []
    finder = _Finder()
    finder.feed(dom)
    return found + finder.found


def assert_inert(pages: list[Path], tmp_path: Path) -> dict[Path, str]:
    """Every page opens, and no payload became markup or ran. Returns the DOMs."""
    doms = {}
    for i, page in enumerate(pages):
        dom = dump_dom(page, tmp_path / f"chromium-{i}")
        assert "<body" in dom, f"{page} did not open"
        bad = injected(dom)
        assert not bad, f"{page}: {bad[:5]}"
        doms[page] = dom
    return doms


def hostile_rows(prefix: str = "") -> list[dict]:
    """One delivery row per payload, with the payload in every field a row
    has (and in an unknown `vendor` column, and as a column's name); every third row breaks its
    contract (created_at, then expert_minutes), so quarantine reasons carry
    payloads too. Math rows are `Calculate a - b.`: the scripted model gets
    them right on even seeds only, so most become learnable."""
    rows = []
    for i, p in enumerate(PAYLOADS):
        row = {
            "task_id": f"{prefix}{p}#{i}",
            "source": f"{p}",
            "batch_id": p,
            "license": p,
            "vendor": p,
            "prompt": f"{p} Calculate {i + 11} - {i % 7 + 1}.",
            "answer": str(i + 11 - (i % 7 + 1)),
            "created_at": "2026-01-02",
            "meta": {"note": p},
        }
        if i % 5 == 3:
            row.update(
                domain="code",
                prompt=f"{p} Write a Python function add(a, b) that returns a + b.",
                tests=f"assert add(1, 2) == 3  # {p}",
                entry_point="add",
                reference_solution=f"def add(a, b):\n    return a + b  # {p}\n",
                answer=None,
            )
        elif i % 5 == 4:
            row.update(domain="rubric", rubric=[p, f"mentions {p}"], answer=None)
        elif i % 5 == 2:
            row.update(domain="exact", answer=p, **{f"col {p}": p})  # a payload answer, and as a column name
        if i % 3 == 2:
            row["created_at"] = p
        elif i % 7 == 6:
            row["expert_minutes"] = p
        rows.append(row)
    return rows


class HostileBackend:
    """The scripted model (fakes.py) whose every completion also carries a
    payload; its extracted answers and errors then do too."""

    model_id = "hostile<img src=x onerror=\"document.title='PWN'+'ED'\">@1"

    def __init__(self):
        from fakes import ScriptedBackend

        self._inner = ScriptedBackend()

    def generate(self, requests, on_result=None):
        out = self._inner.generate(requests, on_result)
        for i, (req, r) in enumerate(zip(requests, out)):
            if dict(req.messages)["user"].startswith("Task:"):
                continue  # the rubric judge's verdict lines stay parseable
            p = PAYLOADS[i % len(PAYLOADS)]
            r.completion = f"{p}\n{r.completion}" + (f"\n\\boxed{{{p}}}" if i % 4 == 3 else "")
            if i % 9 == 8:
                r.error = p
        return out


_SHARED: dict = {}


def hostile_backend():
    return _SHARED.setdefault("b", HostileBackend())
