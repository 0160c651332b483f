#!/usr/bin/env bash
# README command two: set up, then run the whole test suite (the real vLLM
# engine included). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
exec .venv/bin/python -m pytest "$@"
