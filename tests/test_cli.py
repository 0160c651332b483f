"""The command line as a person meets it: exit codes and one-line errors,
all raised before any model is loaded or any money is spent."""

import os
import subprocess
import sys

import pytest


TASKSIEVE = [sys.executable, "-m", "tasksieve.pipeline.cli"]


def _run(*args, cwd=None):
    return subprocess.run([*TASKSIEVE, *args], capture_output=True, text=True, cwd=cwd, timeout=300)


def _error_line(proc):
    lines = [l for l in proc.stderr.strip().splitlines() if l.startswith("tasksieve:")]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_missing_input_fails_with_one_line(tmp_path):
    p = _run("run", "--input", str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "o"))
    assert p.returncode == 1
    assert "input not found" in _error_line(p)
    assert not (tmp_path / "o").exists()


def test_bad_config_fails_with_one_line(tmp_path):
    (tmp_path / "d.jsonl").write_text('{"task_id": "t", "prompt": "Calculate 1 + 1.", "answer": "2"}\n')
    cfg = tmp_path / "c.toml"
    cfg.write_text("[sampling]\nmode = 'adaptive'\n")
    p = _run("run", "--input", str(tmp_path / "d.jsonl"), "--out", str(tmp_path / "o"), "--config", str(cfg))
    assert p.returncode == 1
    assert "sampling.mode" in _error_line(p)


def test_bad_rates_fail_with_one_line(tmp_path):
    (tmp_path / "d.jsonl").write_text('{"task_id": "t", "prompt": "Calculate 1 + 1.", "answer": "2"}\n')
    rates = tmp_path / "r.toml"
    rates.write_text(
        "[expert]\nusd_per_hour = -5\n[verification]\nusd_per_cpu_hour = 1\n"
        "[[generation]]\nmodel = '*'\nunit = 'tokens'\nusd_per_m_input = 1\nusd_per_m_output = 1\n"
    )
    p = _run("run", "--input", str(tmp_path / "d.jsonl"), "--out", str(tmp_path / "o"), "--rates", str(rates))
    assert p.returncode == 1
    assert "expert.usd_per_hour: Input should be greater than or equal to 0" in _error_line(p)


def test_model_that_is_not_a_model_fails_before_sampling(tmp_path):
    (tmp_path / "d.jsonl").write_text('{"task_id": "t", "prompt": "Calculate 1 + 1.", "answer": "2"}\n')
    p = _run("run", "--input", str(tmp_path / "d.jsonl"), "--out", str(tmp_path / "o"), "--model", str(tmp_path))
    assert p.returncode == 1
    assert "not a Hugging Face model folder" in _error_line(p)


def test_usage_errors_exit_2(tmp_path):
    assert _run("run", "--out", str(tmp_path)).returncode == 2
    assert _run("sample-data", str(tmp_path), "--bogus").returncode == 2


@pytest.mark.slow
def test_sample_data_is_deterministic(tmp_path):
    for d in ("a", "b"):
        assert _run("sample-data", str(tmp_path / d)).returncode == 0
    for name in ("vendor_a.jsonl", "vendor_b.parquet"):
        assert (tmp_path / "a/deliveries" / name).read_bytes() == (tmp_path / "b/deliveries" / name).read_bytes()


def test_every_repeated_path_flag_adds_its_paths():
    """`--input a --input b` once read only b: a delivery's rows were lost
    without a word. Each path flag may be given more than once, and every
    path given counts, in order."""
    from tasksieve.pipeline.cli_parser import build_parser

    p = build_parser()
    for cmd in ("run", "dedup"):
        args = p.parse_args(
            [
                cmd,
                "--input",
                "a",
                "--input",
                "b",
                "c",
                "-i",
                "d",
                "--out",
                "o",
                "--dedup-against",
                "p",
                "--dedup-against",
                "q",
            ]
        )
        assert args.input == ["a", "b", "c", "d"] and args.dedup_against == ["p", "q"], cmd
    assert p.parse_args(["run", "-i", "a", "-o", "o", "--replay", "r1", "--replay", "r2"]).replay == ["r1", "r2"]
    args = p.parse_args(["validate", "x", "y", "--against", "p", "--against", "q", "r"])
    assert args.deliveries == ["x", "y"] and args.against == ["p", "q", "r"]


_POOL_AFTER_DEDUP = """
import os, sys
from tasksieve.pipeline import cli
assert "pyarrow" not in sys.modules, "importing the CLI imported pyarrow: too late to pick its allocator"
code = cli.main(["dedup", "--input", sys.argv[1], "--out", sys.argv[2]])
import pyarrow as pa
print(code, pa.default_memory_pool().backend_name)
"""


def _pool_after_dedup(tmp_path, env_pool):
    data = tmp_path / "d.jsonl"
    data.write_text(
        '{"task_id": "a", "prompt": "Calculate 1 + 1.", "answer": "2"}\n'
        '{"task_id": "b", "prompt": "Calculate 2 + 3.", "answer": "5"}\n'
    )
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if env_pool:
        env["ARROW_DEFAULT_MEMORY_POOL"] = env_pool
    out = tmp_path / f"o-{env_pool}"
    p = subprocess.run(
        [sys.executable, "-c", _POOL_AFTER_DEDUP, str(data), str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout.split()[-2:]


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="jemalloc is chosen on Linux only")
def test_cli_runs_arrow_on_jemalloc_unless_the_user_chose_a_pool(tmp_path):
    """The CLI picks Arrow's allocator before pyarrow is first imported (it
    is read once, then): jemalloc, whose freed pages are not zeroed afresh
    on every reuse as mimalloc's huge pages were; a pool the user set is kept."""
    assert _pool_after_dedup(tmp_path, None) == ["0", "jemalloc"]
    assert _pool_after_dedup(tmp_path, "system") == ["0", "system"]
