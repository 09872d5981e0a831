#!/bin/bash
# bench/PENDING.md items 1 and 2 in one nvidia-h200-x2 call, from main's checkout with .devbin
# built from main (bench/scripts/pdl_build_devbin.sh) and the M = 64 quality run's record logs
# at .devbin/quality/q64_runs.tar.gz (a copy of
# results/2026-11-30_h200_fourth_session_calls2_4/q64_runs.tar.gz):
#   GPU 0: issue 4's quality bar at M = 64, resumed (deadline QDL s; run this script again at
#          once to continue while the machine is warm: /tmp/qwork_64 persists);
#   GPU 1 (first call only): `check` at every size of issue 3 and the three anchors' bench with
#          the measured ceilings, main's current defaults (issues 3 and 5's bars in one place).
# Call with QDL=540, carry .devbin, timeout_s 600. A summary prints last; all in $OUT/call.tgz.
set -u
R=/tmp/res_pending; mkdir -p "$R/q" "$R/bars"
{ date -u; head -c 120 .devbin/commit.txt; echo; nvidia-smi -L; } >> "$R/env.txt"
if [ ! -f /tmp/bars.done ]; then
  ( export CUDA_VISIBLE_DEVICES=1 MOETUNE_COMPILE_THREADS=6 MOETUNE_CACHE_DIR=/tmp/moetune_bars_cache
    timeout 200 .devbin/moetune check --variants bf16,fp8_block --configs 1 --layer-only > "$R/bars/check.txt" 2>&1
    echo "check rc $?" >> "$R/bars/check.txt"
    for m in "qwen3.5-122b-a10b --tp 4" "qwen3.5-122b-a10b-fp8 --tp 4" "deepseek-v3 --tp 8"; do
      # shellcheck disable=SC2086
      timeout 60 .devbin/moetune bench --model $m --measured-ceilings \
        --batch 1,8,16,32,64,128,256,1024,4096 > "$R/bars/bench_${m%% *}.txt" 2>&1
    done
    touch /tmp/bars.done ) &
fi
CUDA_VISIBLE_DEVICES=0 MOETUNE_COMPILE_THREADS=24 OUT=$R/q QUALITY_WORK=/tmp/qwork_64 \
  QUALITY_BATCH=64 QUALITY_DEADLINE_S=${QDL:-520} QUALITY_SEED=.devbin/quality/q64_runs.tar.gz \
  MOETUNE_CACHE_DIR=/tmp/moetune_q64_cache bash bench/scripts/tune_quality.sh > "$R/q/driver.log" 2>&1
echo "quality rc $?" >> "$R/q/driver.log"
wait
tar -czf "$OUT/call.tgz" -C "$R" .
echo "=== bars"; grep -vE "^ok " "$R/bars/check.txt" 2>/dev/null | tail -n 3
for f in "$R"/bars/bench_*.txt; do [ -f "$f" ] && { echo "--- $f"; grep -v note: "$f" | tail -n 10; }; done
echo "=== quality (GPU 0)"; tail -n 8 "$R/q/driver.log"
