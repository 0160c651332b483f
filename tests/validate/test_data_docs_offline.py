"""`tasksieve validate x.jsonl --out rel/` (a relative folder, as README
writes it) builds Data Docs that open offline in headless Chromium: no
page loads anything from the network or runs a script, the index links to
every validation result, and report.html, the page to send, opens too
(issue 47)."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from inert_check import dump_dom

TASKSIEVE = [sys.executable, "-m", "tasksieve.pipeline.cli"]
ROWS = [
    {"task_id": "g1", "prompt": "Calculate 3 + 5 and give the result.", "answer": "8", "license": "MIT"},
    {"task_id": "bad", "prompt": "Calculate 6 + 2 and give the result.", "answer": "8", "license": "GPL-3.0"},
]
REMOTE_ASSET = re.compile(r"""<(?:script|link|img)\b[^>]*\b(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", re.I)


@pytest.mark.slow
def test_validate_with_a_relative_out_writes_data_docs_that_open_offline(tmp_path):
    (tmp_path / "x.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    proc = subprocess.run(
        [*TASKSIEVE, "validate", "x.jsonl", "--out", "rel/"], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 1, proc.stderr[-2000:]  # GPL-3.0: not acceptable
    summary = json.loads((tmp_path / "rel" / "summary.json").read_text())
    assert summary["data_docs"]["built"], summary["data_docs"]
    docs = tmp_path / "rel" / "data_docs"
    index = docs / "index.html"
    assert Path(summary["data_docs"]["index"]) == index.resolve()
    pages = sorted(docs.rglob("*.html"))
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert not REMOTE_ASSET.search(text), (page, REMOTE_ASSET.search(text).group(0))
        assert "<script" not in text.lower(), page
    for css in docs.rglob("*.css"):
        assert not re.search(r"url\(\s*['\"]?https?:", css.read_text()), css

    dom = dump_dom(index, tmp_path / "chromium-index")
    assert 'id="tasksieve-docs-nav"' in dom
    links = re.findall(r'<a href="(validations/[^"]+\.html)"', dom)
    assert len(links) == 1, links
    result = docs / links[0]
    assert result.is_file()
    result_dom = dump_dom(result, tmp_path / "chromium-result")
    assert "license" in result_dom and "GPL-3.0" in result_dom  # the failing expectation and its value
    assert 'href="../../../../index.html"' in result_dom  # and the way back
    report = dump_dom(tmp_path / "rel" / "report.html", tmp_path / "chromium-report")
    assert "NOT ACCEPTABLE" in report and "x.jsonl:2" in report
