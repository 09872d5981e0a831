#!/bin/bash
# Thirty-eighth session: issue 5's bars at main on an H200 (the sliced kernel the default at
# M = 6..8 since f49ab6f, its 256-deep GEMM1 units since 0a7c4fd; no H200 has timed either).
# Carry .devbin from bench/scripts/pdl_build_devbin.sh. On any other GPU it stops at once (the
# H100 SXM's bars are 21 of 21, thirty-fifth session). Prediction: Qwen3.5 fp8 TP4 M = 8 about
# 39.4 µs, 81% of floor_measured (85% needs about 37.6); M = 16 about 70.3 µs, 80.8% (stage
# path, unchanged); the other 19 bars as the thirty-fifth session's within 0.5 point.
set -u
nvidia-smi --query-gpu=name,uuid,clocks.max.sm --format=csv,noheader
cat .devbin/commit.txt
if ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  echo "not an H200: nothing to do"; exit 0
fi
export MOETUNE_CACHE_DIR=/tmp/moetune-cache
mkdir -p "$OUT/bars"
OUT=$OUT/bars BENCH_BATCH=1,8,16,32,64,128,256 CHECK_S=${CHECK_S:-60} \
  timeout -k 5 200 bash bench/scripts/final_bars.sh >"$OUT/bars_console.txt" 2>&1
echo "final_bars: exit $?"
grep -E "^ +(1|8|16|32|64|128|256) |rc=" "$OUT/bars_console.txt"
for m in 8 16; do
  timeout 40 .devbin/moetune profile --model qwen3.5-122b-a10b-fp8 --tp 4 --batch $m --measured-ceilings \
    >"$OUT/profile_m$m.txt" 2>&1
  echo "profile M=$m rc=$?"; tail -n 12 "$OUT/profile_m$m.txt"
done
