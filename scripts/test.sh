#!/usr/bin/env bash
# README command two: set up, then run the whole test suite (the real vLLM
# engine included) on every core (pytest-xdist; a test file stays on one
# worker, so its module fixtures are built once). Extra arguments go to
# pytest: -m "not slow" is the fast tier, -n 0 runs in this process.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The report test opens report.html in a real headless Chromium (Debian's).
if ! command -v chromium >/dev/null 2>&1; then
  echo "== installing chromium for the report test (Debian packages chromium, chromium-driver)"
  SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
fi
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
exec .venv/bin/python -m pytest -n "${TEST_WORKERS:-auto}" --dist loadfile "$@"
