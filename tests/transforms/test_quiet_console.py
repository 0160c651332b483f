"""The console shows tasksieve's own lines: the libraries' warnings a user
cannot act on are filtered where they come from (transforms/console.py),
`--verbose` lets them through, and a user's own warnings always show."""

import os
import re
import subprocess
import sys
import textwrap
import warnings

import pytest

from tasksieve.transforms import console

# What a third-party warning looks like on stderr: Python's warnings
# (FutureWarning, UserWarning, ...), logging's default format, a file in
# site-packages, c10's and glog's "[W1204 14:40:20 ..." lines, Beam's apitools.
THIRD_PARTY = re.compile(r"Warning\b|WARNING|site-packages|apitools|^\[?[WEI]\d{4} |Traceback", re.M)


def _python(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
    )


def _cli(*args, **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tasksieve.pipeline.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **env},
    )


def _quiet_env():
    return {k: v for k, v in os.environ.items() if k != console.VERBOSE_ENV}


USER_CODE = """
    import logging, warnings
    import tasksieve.transforms.read  # imports Apache Beam
    print(len(logging.getLogger().handlers))
    warnings.warn("the user's own", FutureWarning)
    logging.warning("the user's own root warning")
"""


def test_importing_a_module_that_imports_beam_prints_nothing_and_leaves_logging_alone():
    proc = _python(USER_CODE, **{console.VERBOSE_ENV: ""})
    assert proc.returncode == 0, proc.stderr
    assert "apitools" not in proc.stderr
    assert proc.stdout.strip() == "0"  # Beam's logging.warning did not configure the root logger
    # The user's own warnings are theirs: not filtered.
    assert "FutureWarning: the user's own" in proc.stderr
    assert "the user's own root warning" in proc.stderr


def test_verbose_environment_lets_beams_warning_through():
    proc = _python(USER_CODE, **{console.VERBOSE_ENV: "1"})
    assert proc.returncode == 0, proc.stderr
    assert "apitools not found" in proc.stderr


@pytest.mark.slow
def test_a_command_says_one_line_and_verbose_shows_the_libraries(tmp_path):
    """`dedup` imports Beam before it finds the input missing."""
    quiet = _cli("dedup", "--input", str(tmp_path / "none"), "--out", str(tmp_path / "o"), **{console.VERBOSE_ENV: ""})
    assert quiet.returncode == 1
    assert quiet.stderr.count("\n") == 1 and quiet.stderr.startswith("tasksieve: error:"), quiet.stderr
    for argv in (["--verbose", "dedup"], ["dedup", "--verbose"]):
        loud = _cli(*argv, "--input", str(tmp_path / "none"), "--out", str(tmp_path / "o"), **{console.VERBOSE_ENV: ""})
        assert loud.returncode == 1
        assert "apitools not found" in loud.stderr, argv


def test_engine_start_filters_only_torchs_warning_from_vllms_dispatcher():
    """The FutureWarning vLLM's start-up triggers is dropped when vLLM's
    dispatcher is where it surfaces; the same text from anywhere else, and
    other FutureWarnings from that module, still show."""
    message = "`torch.distributed.reduce_op` is deprecated, please use `torch.distributed.ReduceOp` instead"
    emit = compile("import warnings\nwarnings.warn(MESSAGE, CATEGORY)", "dispatcher.py", "exec")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        os.environ.pop(console.VERBOSE_ENV, None)
        console.quiet_engine_start()
        exec(emit, {"__name__": "vllm.triton_utils.dispatcher", "MESSAGE": message, "CATEGORY": FutureWarning})
        exec(emit, {"__name__": "users_module", "MESSAGE": message, "CATEGORY": FutureWarning})
        exec(emit, {"__name__": "vllm.triton_utils.dispatcher", "MESSAGE": "other", "CATEGORY": FutureWarning})
        exec(emit, {"__name__": "users_module", "MESSAGE": "mine", "CATEGORY": FutureWarning})
    assert [(str(w.message)[:6], w.category) for w in caught] == [
        (message[:6], FutureWarning),
        ("other", FutureWarning),
        ("mine", FutureWarning),
    ]


@pytest.mark.slow
def test_dedup_on_the_sample_prints_only_tasksieves_lines(sample_dir, tmp_path):
    proc = _cli("dedup", "--input", str(sample_dir), "--out", str(tmp_path / "o"), **{console.VERBOSE_ENV: ""})
    assert proc.returncode == 0, proc.stderr
    assert not THIRD_PARTY.search(proc.stderr), proc.stderr


CPP_WARNING = """
    import os, sys
    from tasksieve.transforms import console
    console.set_verbose(sys.argv[1:] == ["verbose"])
    console.quiet_program_env()   # what the CLI does before anything imports torch
    import torch
    import vllm._custom_ops  # registers vLLM's CPU ops
    torch.ops._C.init_cpu_memory_env([0])   # vLLM's CPU worker at engine start
"""


@pytest.mark.slow
def test_the_numa_binding_line_is_filtered_and_verbose_shows_it():
    pytest.importorskip("vllm")
    env = {k: v for k, v in _quiet_env().items() if k != "TORCH_CPP_LOG_LEVEL"}
    quiet = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(CPP_WARNING)], capture_output=True, text=True, timeout=600, env=env
    )
    loud = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(CPP_WARNING), "verbose"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    if "NUMA" not in loud.stderr:
        pytest.skip(f"this vLLM build does not print the NUMA binding line: {loud.stderr[-300:]}")
    assert quiet.returncode == 0, quiet.stderr
    assert "NUMA" not in quiet.stderr
