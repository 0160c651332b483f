"""Every HTML page the tool writes is inert: delivery values, model output
and file names are shown as text, never run, in headless Chromium.

Pages: `run`'s report.html (with the `select` section), and `validate`'s
report.html and GX Data Docs. The payloads and the DOM check are in
tests/inert_check.py."""

from __future__ import annotations

import json

import pytest

from inert_check import FILE_NAME_PAYLOADS, PAYLOADS, assert_inert, dump_dom, hostile_backend, hostile_rows, injected


def _write(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def test_the_check_sees_each_payload_that_becomes_markup(tmp_path):
    """The DOM check is not vacuous: on a page that pastes the payloads in
    raw (in text, in a double- and a single-quoted attribute), Chromium
    runs them and the check names them."""
    cells = "".join(f"<p>{p}</p><p title=\"{p}\">x</p><p title='{p}'>y</p>" for p in PAYLOADS)
    page = tmp_path / "raw.html"
    page.write_text(f"<!doctype html><html><head><title>raw</title></head><body>{cells}</body></html>")
    dom = dump_dom(page, tmp_path / "p")
    found = injected(dom)
    assert found[0].startswith("a payload ran")
    assert len(found) > len(PAYLOADS) // 2
    # And one payload alone, for each that is markup on its own.
    for p in PAYLOADS:
        if "<" in p and "&lt;" not in p and "&#60;" not in p and not p.startswith(("<!--", "<%")):
            assert injected(f"<html><body><p>{p}</p></body></html>"), p


@pytest.mark.slow
def test_validate_pages_are_inert(tmp_path):
    """A delivery whose every field, in every row, and whose file name carry
    payloads: `validate`'s report.html and each page of its GX Data Docs
    show them as text."""
    from tasksieve.pipeline.validate.command import validate_delivery

    folder = tmp_path / "delivery"
    folder.mkdir()
    rows = hostile_rows()
    _write(folder / "plain.jsonl", rows[: len(rows) // 2])
    for i, name in enumerate(FILE_NAME_PAYLOADS[:4]):
        _write(folder / f"{name}-{i}.jsonl", rows[len(rows) // 2 + i :: 4])
    (folder / f"{FILE_NAME_PAYLOADS[0]}-broken.jsonl").write_text('{"task_id": "<b>cut</b>", "prompt": "x\n')
    out = tmp_path / "validation"
    summary = validate_delivery([str(folder)], out, echo=False)
    assert summary["data_docs"]["built"], summary["data_docs"]
    pages = [out / "report.html", *sorted((out / "data_docs").rglob("*.html"))]
    assert len(pages) >= 4  # report, Data Docs index, the suite, the validation
    doms = assert_inert(pages, tmp_path)
    # The values are shown, as text, not dropped: exactly in report.html,
    # with look-alike characters in the Data Docs.
    assert "license is one of" in doms[out / "report.html"]
    assert "Content-Security-Policy" in doms[out / "report.html"]
    assert PAYLOADS[0].replace("<", "&lt;").replace(">", "&gt;") in doms[out / "report.html"]
    docs = "".join(d for p, d in doms.items() if "data_docs" in str(p))
    assert "\u2039script\u203a" in docs and "<script>document" not in docs
    on_disk = json.loads((out / "summary.json").read_text())
    assert any(o["task_id"] == rows[0]["task_id"] for c in on_disk["checks"] for o in c["offenders"])


@pytest.mark.slow
def test_run_and_select_report_is_inert(tmp_path):
    """`run` over the hostile delivery with a model whose completions,
    answers and errors carry payloads, then `select`: report.html, with its
    dropped, quarantined and per-source tables, charts and the selection's
    representative prompts, shows every payload as text."""
    from tasksieve.pipeline.cli import main
    from tasksieve.pipeline.report.command import write_report
    from tasksieve.pipeline.run.command import run
    from tasksieve.schemas.config import RunConfig

    folder = tmp_path / "delivery"
    folder.mkdir()
    rows = hostile_rows()
    _write(folder / "plain.jsonl", rows)
    nameless = [{k: v for k, v in r.items() if k not in ("source", "batch_id")} for r in hostile_rows("f-")[:6]]
    _write(folder / f"{FILE_NAME_PAYLOADS[1]}.jsonl", nameless)  # its rows' source is this file name
    out = tmp_path / "out"
    # Some of the backend's requests fail with a payload as their error: a
    # share that would stop a real run (model.max_failed_share), allowed here
    # so the page shows those errors too.
    cfg = RunConfig.model_validate({"model": {"max_failed_share": 1.0}})
    figures = run([str(folder)], str(out), cfg, None, [], backend_factory=hostile_backend)
    assert figures["learnable"] >= 3, figures
    assert main(["select", str(out), "--budget-tasks", "3"]) == 0
    path, _ = write_report(out)
    (dom,) = assert_inert([path], tmp_path).values()
    assert 'data-report-ready="yes"' in dom and 'id="selection"' in dom  # the page's own script still runs
    assert "onerror=" in dom  # the payloads are on the page, as text
    assert "onerror=" in dom[dom.index('id="selection"') :]  # in the selection's prompts and task ids too
    assert "Content-Security-Policy" in dom
