"""`tasksieve export` and `tasksieve.rewards`: the learnable set in each
trainer's format, provenance on every row, and rewards that give the
run's own verdicts on its recorded attempts."""

from __future__ import annotations

import json
import subprocess
import sys

import duckdb
import pyarrow.parquet as pq
import pytest

from fakes import ScriptedBackend
from tasksieve.pipeline.run.command import run
from tasksieve.schemas.config import RunConfig

TASKSIEVE = [sys.executable, "-m", "tasksieve.pipeline.cli"]


def _delivery() -> list[dict]:
    rows = []
    for i, (a, b) in enumerate([(17, 4), (93, 28), (61, 7), (250, 99), (48, 13), (812, 305)]):
        rows.append(
            {
                "task_id": f"m{i}",
                "prompt": f"Calculate {a} - {b}.",
                "answer": str(a - b),
                "license": ["cc-by-4.0", "cc-by-nc-4.0", "mit"][i % 3],
                "source": ["vendor_a", "vendor_b"][i % 2],
            }
        )
    for i, (a, b) in enumerate([(3, 9), (40, 2)]):
        rows.append({"task_id": f"p{i}", "prompt": f"Calculate {a} + {b}.", "answer": str(a + b), "license": "mit"})
    for i, (a, b) in enumerate([(71, 9), (305, 18), (66, 41)]):
        rows.append(
            {
                "task_id": f"e{i}",
                "domain": "exact",
                "prompt": f"Calculate {a} - {b}.",
                "answer": str(a - b),
                "license": "mit",
                "source": "vendor_e",
            }
        )
    for i, name in enumerate(["minus", "subtract_two", "difference"]):
        rows.append(
            {
                "task_id": f"c{i}",
                "domain": "code",
                "license": "apache-2.0",
                "prompt": f"Write a Python function {name}(a, b) that returns a - b.",
                "tests": f"assert {name}(5, 3) == 2\nassert {name}(0, 9) == -9\n",
                "entry_point": name,
                "reference_solution": f"def {name}(a, b):\n    return a - b\n",
            }
        )
    return rows


@pytest.fixture(scope="module")
def curated(tmp_path_factory):
    d = tmp_path_factory.mktemp("export_run")
    (d / "in").mkdir()
    (d / "in" / "delivery.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _delivery()))
    backend = ScriptedBackend()

    def factory():
        return backend

    factory.model_id = backend.model_id
    out = d / "out"
    run([str(d / "in")], str(out), RunConfig(), None, [], backend_factory=factory)
    return out


def _learnable(out) -> list[dict]:
    con = duckdb.connect(str(out / "curation.duckdb"), read_only=True)
    try:
        cur = con.execute("SELECT * FROM tasks WHERE status = 'learnable' ORDER BY task_id")
        cols = [c[0] for c in cur.description]
        return [dict(zip(cols, r)) for r in cur.fetchall()]
    finally:
        con.close()


def _export(out, fmt, to, *extra):
    return subprocess.run(
        [*TASKSIEVE, "export", str(out), "--format", fmt, "--to", str(to), *extra],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["verl", "trl", "openrlhf"])
def test_each_trainer_format_loads_with_datasets_one_row_per_learnable_task(curated, tmp_path, fmt):
    from datasets import load_dataset

    learnable = _learnable(curated)
    assert {r["domain"] for r in learnable} >= {"math", "code", "exact"}
    p = _export(curated, fmt, tmp_path / fmt)
    assert p.returncode == 0, p.stderr
    assert f"exported {len(learnable)} tasks as {fmt}" in p.stdout and "math" in p.stdout and "code" in p.stdout
    ds = load_dataset("parquet", data_files=str(tmp_path / fmt / "train.parquet"), split="train")
    assert len(ds) == len(learnable)
    rows = ds.to_list()
    assert sorted(r["extra_info"]["task_id"] if fmt == "verl" else r["task_id"] for r in rows) == [
        r["task_id"] for r in learnable
    ]
    run_id = learnable[0]["run_id"]
    for r in rows:
        prov = r["extra_info"] if fmt == "verl" else r
        assert prov["run_id"] == run_id and prov["model_id"] == ScriptedBackend.model_id
        assert prov["content_hash"] and prov["source"] and "license" in prov
        assert 0 < prov["pass_rate"] < 1
        assert r["prompt"][-1]["role"] == "user" and r["prompt"][0]["role"] == "system"
    if fmt == "verl":
        for r in rows:
            assert set(r) >= {"data_source", "prompt", "ability", "reward_model", "extra_info"}
            assert r["reward_model"]["style"] == "rule" and r["reward_model"]["ground_truth"]
            assert r["ability"] == r["extra_info"]["domain"]
            if r["ability"] == "code":
                assert r["extra_info"]["entry_point"] and "assert" in r["extra_info"]["tests"]
    if fmt == "openrlhf":
        assert all(json.loads(r["label"])["domain"] in ("math", "code", "exact") for r in rows)
    manifest = json.loads((tmp_path / fmt / "export.json").read_text())
    assert manifest["rows"] == len(learnable) and manifest["run_id"] == run_id


def test_hf_format_is_a_datasets_folder_with_a_dataset_card(curated, tmp_path):
    from datasets import load_from_disk

    p = _export(curated, "hf", tmp_path / "hf", "--split-by", "domain")
    assert p.returncode == 0, p.stderr
    dd = load_from_disk(str(tmp_path / "hf"))
    learnable = _learnable(curated)
    assert sorted(dd) == sorted({r["domain"] for r in learnable})
    assert sum(len(dd[s]) for s in dd) == len(learnable)
    card = (tmp_path / "hf" / "README.md").read_text()
    assert learnable[0]["run_id"] in card and "## Licences" in card and "## Pass rates" in card
    assert "vendor_a" in card


@pytest.mark.slow
def test_rewards_give_the_runs_verdicts_on_its_recorded_attempts(curated, tmp_path):
    import tasksieve.rewards as rewards

    assert _export(curated, "verl", tmp_path / "v").returncode == 0
    rows = pq.read_table(tmp_path / "v" / "train.parquet").to_pylist()
    spec_by_hash = {r["extra_info"]["content_hash"]: r["extra_info"]["verifier"] for r in rows}
    attempts = [a for a in pq.read_table(curated / "attempts.parquet").to_pylist() if a["content_hash"] in spec_by_hash]
    assert len(attempts) >= 10 and {a["passed"] for a in attempts} == {True, False}
    domains = {json.loads(spec_by_hash[a["content_hash"]])["domain"] for a in attempts}
    assert domains >= {"math", "code", "exact"}
    scores = [
        rewards.compute_score(r["data_source"], a["completion"], r["reward_model"]["ground_truth"], r["extra_info"])
        for a in attempts
        for r in rows
        if r["extra_info"]["content_hash"] == a["content_hash"]
    ]
    assert scores == [1.0 if a["passed"] else 0.0 for a in attempts]
    # TRL (conversational completions) and OpenRLHF (query = prompt + response) agree too.
    trl = rewards.trl_reward(
        [[{"role": "assistant", "content": a["completion"]}] for a in attempts],
        verifier=[spec_by_hash[a["content_hash"]] for a in attempts],
    )
    assert trl == scores
    orl = rewards.reward_func(
        [f"PROMPT{a['completion']}" for a in attempts],
        ["PROMPT"] * len(attempts),
        [spec_by_hash[a["content_hash"]] for a in attempts],
    )
    assert [float(x) for x in orl["rewards"]] == scores


def test_rubric_rewards_use_the_judge_as_curation_did():
    import tasksieve.rewards as rewards
    from tasksieve.transforms.verify.verifiers import verify_attempts

    task = {
        "domain": "rubric",
        "prompt": "Describe the water cycle.",
        "rubric": ["Mentions evaporation.", "Mentions condensation."],
        "content_hash": "h-rubric",
        "answer": None,
        "tests": None,
        "entry_point": None,
        "reference_solution": None,
    }
    completions = [f"Water evaporates and condenses ({i})." for i in range(6)]
    seeds = list(range(6))
    run_verdicts = verify_attempts([(task, c) for c in completions], judge=ScriptedBackend(), seeds=seeds)
    rewards.configure(judge=ScriptedBackend())
    try:
        got = rewards.verdicts([json.dumps(task)] * 6, completions, seeds)
    finally:
        rewards.configure()
    assert [v["passed"] for v in got] == [v["passed"] for v in run_verdicts]
    assert {v["passed"] for v in got} == {True, False}
    # Without a judge a rubric attempt never passes, and says why.
    assert not any(v["passed"] for v in rewards.verdicts([json.dumps(task)], ["anything"]))


@pytest.mark.slow
def test_export_refuses_a_non_empty_folder_without_force_and_is_idempotent_with_it(curated, tmp_path):
    to = tmp_path / "x"
    to.mkdir()
    (to / "mine.txt").write_text("keep me")
    p = _export(curated, "trl", to)
    assert p.returncode == 2 and "not empty" in p.stderr and "--force" in p.stderr
    assert (to / "mine.txt").read_text() == "keep me"
    assert _export(curated, "trl", to, "--force").returncode == 0
    first = pq.read_table(to / "train.parquet").to_pylist()
    assert not (to / "mine.txt").exists()
    assert _export(curated, "trl", to, "--force").returncode == 0
    assert pq.read_table(to / "train.parquet").to_pylist() == first
    assert [p.name for p in tmp_path.iterdir()] == ["x"]  # no staging folder left behind


def test_export_refuses_links_and_the_run_folder_itself(curated, tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "link").symlink_to(target)
    p = _export(curated, "verl", tmp_path / "link", "--force")
    assert p.returncode == 2 and "link" in p.stderr
    assert not any(target.iterdir())
    p = _export(curated, "verl", curated, "--force")
    assert p.returncode == 2 and (curated / "curation.duckdb").exists()


@pytest.mark.slow
def test_licences_travel_and_filter(curated, tmp_path):
    learnable = _learnable(curated)
    p = _export(curated, "trl", tmp_path / "c", "--licenses", "commercial")
    assert p.returncode == 0, p.stderr
    rows = pq.read_table(tmp_path / "c" / "train.parquet").to_pylist()
    assert rows and all("nc" not in r["license"] for r in rows)
    assert len(rows) == sum(1 for r in learnable if r["license"] and "-nc" not in r["license"])
    p = _export(curated, "trl", tmp_path / "m", "--licenses", "MIT")
    assert p.returncode in (0, 1)
    if p.returncode == 0:
        assert {r["license"] for r in pq.read_table(tmp_path / "m" / "train.parquet").to_pylist()} == {"mit"}
    p = _export(curated, "trl", tmp_path / "none", "--licenses", "no-such-licence")
    assert p.returncode == 1 and "licenses" in p.stderr and not (tmp_path / "none").exists()


def test_export_waits_for_no_one_holding_the_output_folder(curated, tmp_path):
    import fcntl

    with open(curated / ".tasksieve.lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        p = _export(curated, "verl", tmp_path / "locked")
    assert p.returncode == 1 and "in use" in p.stderr and not (tmp_path / "locked").exists()


def test_export_of_a_folder_without_a_run_is_one_line(tmp_path):
    p = _export(tmp_path, "verl", tmp_path / "to")
    assert p.returncode == 1 and len(p.stderr.strip().splitlines()) == 1 and "tasksieve run" in p.stderr


@pytest.mark.slow
def test_a_selection_exports_only_the_chosen_tasks(curated, tmp_path):
    p = subprocess.run(
        [*TASKSIEVE, "select", str(curated), "--budget-tasks", "2"], capture_output=True, text=True, timeout=600
    )
    assert p.returncode == 0, p.stderr
    con = duckdb.connect(str(curated / "curation.duckdb"), read_only=True)
    try:
        (sid,) = con.execute("SELECT selection_id FROM selections ORDER BY created_at DESC LIMIT 1").fetchone()
        chosen = {
            r[0]
            for r in con.execute("SELECT task_id FROM selection WHERE selection_id = ? AND selected", [sid]).fetchall()
        }
    finally:
        con.close()
    assert len(chosen) == 2
    p = _export(curated, "verl", tmp_path / "sel", "--selection", sid)
    assert p.returncode == 0, p.stderr
    rows = pq.read_table(tmp_path / "sel" / "train.parquet").to_pylist()
    assert {r["extra_info"]["task_id"] for r in rows} == chosen
    assert json.loads((tmp_path / "sel" / "export.json").read_text())["selection_id"] == sid
    p = _export(curated, "verl", tmp_path / "nosel", "--selection", "no-such-id")
    assert p.returncode == 1 and "no-such-id" in p.stderr


def test_a_failed_swap_leaves_the_previous_export_in_place(tmp_path, monkeypatch):
    import os

    from tasksieve.pipeline.export import command

    to, staging = tmp_path / "to", tmp_path / ".to.export-x"
    to.mkdir()
    (to / "train.parquet").write_text("previous export")
    staging.mkdir()
    (staging / "train.parquet").write_text("new export")
    real_rename = os.rename

    def failing(src, dst):
        if str(src) == str(staging):
            raise OSError(28, "No space left on device")
        return real_rename(src, dst)

    monkeypatch.setattr(command.os, "rename", failing)
    with pytest.raises(OSError):
        command._swap_into_place(staging, to)
    assert (to / "train.parquet").read_text() == "previous export"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".to.export-x", "to"]  # nothing moved aside is left
