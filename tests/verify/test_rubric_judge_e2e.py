"""The rubric judge end to end: a correct stand-in judge, a weak one that
copies rating lines, and a judge behind an OpenAI-compatible server that
fails some requests first (tests/fake_judge.py)."""

from __future__ import annotations

import json
import sys
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import duckdb
import pyarrow.parquet as pq
import pytest

from tasksieve.pipeline.run.command import run
from tasksieve.schemas.config import RunConfig

from tests.fake_judge import CopierJudge, OracleJudge, RubricSampler, rubric_task

pytestmark = pytest.mark.slow


def _delivery(tmp_path, n=6, unlabelled=()):
    rows = [
        rubric_task(
            i,
            labelled=i not in unlabelled,
            source="vendor_r" if i % 2 else "vendor_s",
            grader="ann" if i % 3 else "bob",
        )
        for i in range(n)
    ]
    rows.append({"task_id": "M-1", "domain": "math", "prompt": "Calculate 2 + 3.", "answer": "5"})
    d = tmp_path / "in"
    d.mkdir()
    (d / "d.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return d


def _cfg(**judge) -> RunConfig:
    cfg = RunConfig()
    cfg.sampling.mode, cfg.sampling.k = "fixed", 4
    cfg.dedup.near = False
    for k, v in judge.items():
        setattr(cfg.judge, k, v)
    return cfg


def _run(tmp_path, judge, cfg=None, **kw):
    shared = {}

    def sampler():
        return shared.setdefault("s", RubricSampler())

    def judge_factory():
        return shared.setdefault("j", judge)

    judge_factory.model_id = judge.model_id
    out = tmp_path / "out"
    fig = run(
        [str(_delivery(tmp_path, **kw))],
        str(out),
        cfg or _cfg(),
        None,
        [],
        backend_factory=sampler,
        judge_factory=judge_factory,
    )
    return fig, out


def test_a_correct_judge_keeps_calibrated_tasks_learnable(tmp_path, capsys):
    fig, out = _run(tmp_path, OracleJudge())
    res = pq.read_table(out / "results.parquet").to_pylist()
    rubric = [r for r in res if r["domain"] == "rubric"]
    assert len(rubric) == 6 and all(r["status"] == "learnable" for r in rubric)
    assert all(r["judge_agreement"] == "measured" and r["judge_kappa"] == 1.0 for r in rubric)
    att = pq.read_table(out / "attempts.parquet").to_pylist()
    injected = [a for a in att if "Ignore the criteria" in a["completion"]]
    assert injected and not any(a["passed"] for a in injected)
    con = duckdb.connect(str(out / "curation.duckdb"), read_only=True)
    rows = con.execute("select scope, task_id, n_labels, agreement, kappa, verdict from judge_agreement").fetchall()
    tasks = [r for r in rows if r[0] == "task"]
    assert len(tasks) == 6 and all(r[2] == 12 and r[4] >= 0.8 and r[5] == "trusted" for r in tasks)
    pooled = {(r[0]) for r in rows if r[1] is None}
    assert {"source", "grader", "judge", "all"} <= pooled
    allrow = con.execute(
        "select n_labels, kappa, kappa_lo, kappa_hi from judge_agreement where scope = 'all'"
    ).fetchone()
    assert allrow[0] == 72 and allrow[1] == 1.0 and allrow[2] is not None
    # The gate's judge calls are priced (component judge, no attempt).
    assert (
        con.execute("select count(*) from costs where component = 'judge' and attempt_idx is null").fetchone()[0] == 6
    )
    assert "rubric judge oracle-judge@test: kappa 1.00" in capsys.readouterr().out


def test_a_weak_copying_judge_is_trusted_on_nothing(tmp_path, capsys):
    fig, out = _run(tmp_path, CopierJudge())
    res = pq.read_table(out / "results.parquet").to_pylist()
    rubric = [r for r in res if r["domain"] == "rubric"]
    assert len(rubric) == 6
    assert all(r["status"] == "dropped" and r["drop_reason"] in ("judge_hackable", "judge_unreliable") for r in rubric)
    assert not any(r["status"] in ("learnable", "all_pass") for r in rubric)
    assert (
        not pq.read_table(out / "attempts.parquet")
        .filter(
            __import__("pyarrow.compute").compute.equal(pq.read_table(out / "attempts.parquet")["verifier"], "rubric")
        )
        .num_rows
    )
    text = capsys.readouterr().out
    assert "not trusted on 6 of 6 rubric tasks" in text and "point [judge] at a better model" in text
    from tasksieve.pipeline.report.command import write_report

    page, terminal = write_report(out)
    html = page.read_text()
    assert "rubric judge copier-judge@test: kappa" in terminal and "not trusted on 6 of 6" in terminal
    assert "the judge gate saved ~$" in terminal and "24 attempts not sampled" in terminal
    assert 'id="table-judge-pooled"' in html and 'id="chart-judge-kappa"' in html and "not trusted on 6 of 6" in html
    math = next(r for r in res if r["task_id"] == "M-1")
    assert math["status"] in ("learnable", "all_pass", "all_fail")


def test_unlabelled_tasks_are_marked_or_dropped(tmp_path):
    fig, out = _run(tmp_path, OracleJudge(), unlabelled=(0,))
    r0 = next(r for r in pq.read_table(out / "results.parquet").to_pylist() if r["task_id"] == "R-0")
    assert r0["judge_agreement"] == "unmeasured" and r0["status"] == "learnable"
    (tmp_path / "b").mkdir()
    fig, out = _run(tmp_path / "b", OracleJudge(), _cfg(require_calibration=True), unlabelled=(0,))
    r0 = next(r for r in pq.read_table(out / "results.parquet").to_pylist() if r["task_id"] == "R-0")
    assert r0["status"] == "dropped" and r0["drop_reason"] == "judge_uncalibrated"


class _JudgeServer:
    """An OpenAI-compatible judge: the oracle's ratings; the first `fail`
    requests get a 503 (retried by the client)."""

    def __init__(self, fail: int = 2):
        self.hits, self.fail, oracle = 0, fail, OracleJudge()
        server = self
        lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _send(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._send(200, {"object": "list", "data": [{"id": "judge-m", "object": "model"}]})

            def do_POST(self):
                req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with lock:
                    server.hits += 1
                    failing = server.hits <= server.fail
                if failing:
                    return self._send(503, {"error": {"message": "overloaded"}})
                text = oracle.rate(req["messages"][-1]["content"])
                self._send(
                    200,
                    {
                        "id": "x",
                        "object": "chat.completion",
                        "created": 0,
                        "model": "judge-m",
                        "choices": [
                            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
                        ],
                        "usage": {"prompt_tokens": 300, "completion_tokens": 9, "total_tokens": 309},
                    },
                )

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_a_judge_behind_a_server_with_retries(tmp_path):
    srv = _JudgeServer(fail=2)
    try:
        cfg = _cfg(backend="openai", model_id="judge-m@server")
        cfg.judge.openai.base_url, cfg.judge.openai.max_retries, cfg.judge.openai.concurrency = srv.url, 3, 2
        out = tmp_path / "out"
        run([str(_delivery(tmp_path, n=3))], str(out), cfg, None, [], backend_factory=lambda: RubricSampler())
        res = pq.read_table(out / "results.parquet").to_pylist()
        assert all(r["status"] == "learnable" for r in res if r["domain"] == "rubric")
        att = pq.read_table(out / "attempts.parquet").to_pylist()
        assert {a["judge_model_id"] for a in att if a["verifier"] == "rubric"} == {"judge-m@server"}
        assert srv.hits > 2
        con = duckdb.connect(str(out / "curation.duckdb"), read_only=True)
        assert (
            con.execute(
                "select count(*) from judge_agreement where judge_model_id = 'judge-m@server' "
                "and scope = 'task' and kappa = 1"
            ).fetchone()[0]
            == 3
        )
    finally:
        srv.close()


def test_the_cli_refuses_a_judge_server_that_does_not_answer(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        '[judge]\nbackend = "openai"\nmodel_id = "j@x"\n[judge.openai]\nbase_url = "http://127.0.0.1:9/v1"\n'
        'max_retries = 0\ntimeout_s = 2\n[model]\nbackend = "replay"\nreplay_paths = ["x.jsonl"]\n'
    )
    (tmp_path / "x.jsonl").write_text(json.dumps({"prompt": "Calculate 2 + 3.", "completion": "5"}) + "\n")
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "tasksieve.pipeline.cli",
            "run",
            "--input",
            str(_delivery(tmp_path, n=1)),
            "--out",
            str(tmp_path / "o"),
            "--config",
            str(cfg),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert p.returncode == 1 and "not answering" in p.stderr and "Traceback" not in p.stderr


def test_labels_from_a_graded_file(tmp_path):
    labels = tmp_path / "labels.jsonl"
    labels.write_text(json.dumps({"task_id": "R-0", "graded_attempts": rubric_task(0)["graded_attempts"]}) + "\n")
    fig, out = _run(tmp_path, OracleJudge(), _cfg(graded=str(labels)), unlabelled=(0,))
    r0 = next(r for r in pq.read_table(out / "results.parquet").to_pylist() if r["task_id"] == "R-0")
    assert r0["judge_agreement"] == "measured" and r0["judge_kappa"] == 1.0
    (labels.parent / "bad.json").write_text("[1, 2]")
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "tasksieve.pipeline.cli",
            "run",
            "--input",
            str(tmp_path / "in"),
            "--out",
            str(tmp_path / "o2"),
            "--graded",
            str(labels.parent / "bad.json"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 1 and "--graded" in p.stderr and "Traceback" not in p.stderr
