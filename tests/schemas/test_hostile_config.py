"""Hostile config values are bounded: the `[select] value` expression can
neither hang `select` nor fill its memory, and settings that silently
defeat a check (a rubric threshold every attempt meets, a weaker sandbox
than the one that works here) print one warning line and are recorded in
the run's row of the `runs` table."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import duckdb
import pytest

from tasksieve.schemas.config import ConfigError, RunConfig, config_warnings, load_config
from tasksieve.transforms.select.value import (
    MAX_FORMULA_CHARS,
    MAX_FORMULA_DEPTH,
    MAX_FORMULA_NODES,
    ValueFormulaError,
    check_formula,
    task_values,
)

# Each would hang Python's eval or take gigabytes: big-integer powers (nested,
# multiplied, as huge literals), string and list repetition, shifts, deep
# nesting and very long expressions.
ATTACKS = [
    "9**9**9**9",
    "9**9**9",
    "2**(2**(2**(2**99)))",
    "(10**10**8)*(10**10**8)",
    "10**10**8 * p",
    "p ** 9**9**9",
    "(9**9**9) / (9**9**8)",
    "-(9**9**9)",
    "max(9**9**9, p)",
    "exp(9**9**9)",
    "9" * 400,
    "p * " + "9" * 300,
    "'a' * 10**10",
    "[p] * 10**10",
    "'a' * 9**9**9",
    "1 << 10**10",
    "p << 9**9",
    "1 >> -1",
    "(1, 2) * 10**10",
    "-" * 450 + "p",
    "+" * 450 + "p",
    "(" * 150 + "p" + ")" * 150,
    "(" * 240 + "p" + ")" * 240,
    "+".join(["p"] * 120),
    "p" + "**p" * 120,
    "sqrt(" * 40 + "p" + ")" * 40,
    "p*" * 300 + "p",
    "p" * (MAX_FORMULA_CHARS + 1),
    "max(p, n, p)",
    "min(p)",
    "exp(p, p)",
    "p\x00",
    "9**9**9**9 if p else 0",
]


def test_value_attacks_finish_and_give_finite_values():
    """In a child process, so that before the bound a hang fails the test
    (the child is killed at the limit) instead of hanging the suite."""
    code = textwrap.dedent(f"""
        import json, math
        from tasksieve.transforms.select.value import ValueFormulaError, task_values
        out = []
        for f in {ATTACKS!r}:
            try:
                v = task_values([1, 3, 0], [4, 4, 2], formula=f)[0].tolist()
                out.append(["ok", all(math.isfinite(x) and x >= 0 for x in v)])
            except ValueFormulaError as e:
                out.append(["refused", "\\n" not in str(e) and len(str(e)) < 400])
        print(json.dumps(out))
    """)
    try:
        child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("a [select] value formula did not finish: evaluation is not bounded")
    assert child.returncode == 0, child.stderr[-2000:]
    results = json.loads(child.stdout)
    assert len(results) == len(ATTACKS)
    for formula, (how, fine) in zip(ATTACKS, results):
        assert fine, (formula[:60], how)


def test_value_bounds_are_checked_when_the_config_loads(tmp_path):
    cfg = tmp_path / "c.toml"
    for formula, words in [
        ("p" * (MAX_FORMULA_CHARS + 1), "characters"),
        ("+".join(["p"] * (MAX_FORMULA_NODES // 2 + 1)), "parts"),
        ("sqrt(" * (MAX_FORMULA_DEPTH + 1) + "p" + ")" * (MAX_FORMULA_DEPTH + 1), "nests"),
        ("1 << 10", "LShift"),
        ("'a' * 3", "constant"),
        ("min(p)", "argument"),
    ]:
        cfg.write_text(f"[select]\nvalue = {json.dumps(formula)}\n")
        with pytest.raises(ConfigError, match=words):
            load_config(cfg)
    # What a sensible formula needs still fits.
    check_formula("1 - p**G - (1 - p)**G + 0.1 * sqrt(n) * min(p, 1 - p) / max(m, 0.01)")
    v, _, _ = task_values([4], [8], formula="9**9**9**9 * 0 + p", prior_strength=0)
    assert v.tolist() == [0.0]  # inf * 0 is NaN: the task's value is 0, as for any non-finite value
    with pytest.raises(ValueFormulaError):
        task_values([1], [2], formula="p" * (MAX_FORMULA_CHARS + 1))


def test_select_sizes_are_bounded(tmp_path):
    cfg = tmp_path / "c.toml"
    for key, value in [("random_draws", 10**9), ("clusters", 10**6)]:
        cfg.write_text(f"[select]\n{key} = {value}\n")
        with pytest.raises(ConfigError, match=f"select.{key}"):
            load_config(cfg)


def test_the_removed_batch_key_is_named_as_removed(tmp_path):
    """`[dedup] batch` chose the row-at-a-time graph, which is gone: a
    config that still sets it, either way, fails naming the key as removed
    (not merely unknown); the other dedup keys still load."""
    cfg = tmp_path / "c.toml"
    for value in ("true", "false"):
        cfg.write_text(f"[dedup]\nshards = 4\nbatch = {value}\n")
        with pytest.raises(ConfigError, match=r"dedup: .*key 'batch' was removed"):
            load_config(cfg)
    cfg.write_text("[dedup]\nshards = 4\n")
    assert load_config(cfg).dedup.shards == 4
    cfg.write_text("[dedup]\nbatchh = true\n")
    with pytest.raises(ConfigError, match="dedup.batchh: Extra inputs"):
        load_config(cfg)


def test_validate_config_warns_too(tmp_path, capsys):
    from tasksieve.pipeline.validate.command import load_run_config

    cfg = tmp_path / "c.toml"
    cfg.write_text("[verify]\nrubric_pass_threshold = 0.0\n")
    load_run_config(str(cfg))
    lines = [l for l in capsys.readouterr().err.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("tasksieve: warning: verify.rubric_pass_threshold = 0")
    load_run_config(None)  # the defaults: nothing to say
    assert not capsys.readouterr().err


def test_config_warnings_name_settings_that_defeat_a_check():
    assert config_warnings(RunConfig()) == []
    zero = RunConfig.model_validate({"verify": {"rubric_pass_threshold": 0}})
    (w,) = config_warnings(zero)
    assert "rubric_pass_threshold" in w and "every rubric attempt passes" in w
    assert config_warnings(RunConfig.model_validate({"verify": {"rubric_pass_threshold": 0.01}})) == []
    for mode in ("rlimit", "unsafe-root"):
        weak = RunConfig.model_validate({"verify": {"sandbox": mode}})
        (w,) = config_warnings(weak, bwrap_works=lambda: True)
        assert mode in w and "bubblewrap works" in w
        assert config_warnings(weak, bwrap_works=lambda: False) == []  # the strongest there is here
    for mode in ("auto", "bwrap"):
        assert config_warnings(RunConfig.model_validate({"verify": {"sandbox": mode}}), bwrap_works=lambda: True) == []


@pytest.mark.slow
def test_a_run_prints_each_warning_once_and_records_it(tmp_path, capfd):
    from fakes import scripted_backend
    from tasksieve.pipeline.run.preflight import bwrap_works
    from tasksieve.pipeline.run.command import run

    delivery = tmp_path / "d.jsonl"
    delivery.write_text(
        "".join(
            json.dumps({"task_id": f"t{i}", "prompt": f"Calculate {i + 7} - {i}.", "answer": "7"}) + "\n"
            for i in range(3)
        )
    )
    cfg_file = tmp_path / "c.toml"
    cfg_file.write_text('[verify]\nrubric_pass_threshold = 0\nsandbox = "rlimit"\n')
    cfg = load_config(cfg_file)
    expected = config_warnings(cfg, bwrap_works)
    assert len(expected) == (2 if bwrap_works() else 1)
    out = tmp_path / "out"
    figures = run([str(delivery)], str(out), cfg, None, [], config_path=str(cfg_file), backend_factory=scripted_backend)
    err = capfd.readouterr().err
    for w in expected:
        assert err.count(f"tasksieve: warning: {w}") == 1, err[-3000:]
    assert figures["warnings"] == expected
    con = duckdb.connect(str(out / "curation.duckdb"), read_only=True)
    (recorded,) = con.execute("select warnings from runs").fetchone()
    con.close()
    assert json.loads(recorded) == expected
