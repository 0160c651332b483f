#!/usr/bin/env bash
# README command one: set up, build the bundled sample delivery, curate it.
# Outputs land in ./demo-out (override with DEMO_OUT=...); the sample delivery
# is written beside it, in ./demo-out.sample: never inside the output folder,
# which tasksieve owns (a folder holding other files and no run is refused).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
out=${DEMO_OUT:-demo-out}
.venv/bin/tasksieve sample-data "$out.sample" >/dev/null
.venv/bin/tasksieve run --input "$out.sample/deliveries" --out "$out" ${DEMO_ARGS:-}
echo
.venv/bin/tasksieve report "$out"
echo
echo "query it:  .venv/bin/python -c \"import duckdb; print(duckdb.connect('$out/curation.duckdb').sql('select * from funnel'))\""
