#!/bin/bash
cd /work/main
P=.venv/bin/python; B=bench/vllm_tuning/bench.py
TC=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4.5.10
IO=/work/main/.venv/lib/libiomp5.so
run() { echo "=== $*"; s=$(date +%s); env "$@" timeout 200 $P $B > /tmp/vlog_$(date +%s%N).txt 2>&1; rc=$?; echo "rc=$rc wall=$(( $(date +%s)-s ))"; ls -t /tmp/vlog_*.txt | head -1 | xargs grep -h "RESULT\|torch threads"; }
run LD_PRELOAD=$TC:$IO N=32 MT=128
run LD_PRELOAD=$TC N=32 MT=128
run LD_PRELOAD=$TC:$IO N=32 MT=128 TOPP=1.0
run LD_PRELOAD=$TC:$IO N=32 MT=128 OMP_NUM_THREADS=2
run LD_PRELOAD=$TC:$IO N=32 MT=32 DT=bfloat16
run LD_PRELOAD=$TC:$IO N=32 MT=32 DT=float16
