#!/bin/bash
# Thirty-fifth session, one call on an H200 or H100 SXM (carry .devbin from pdl_build_devbin.sh
# at f49ab6f or later): the sliced kernel as both GPUs' default at M = 6..8, and never with
# --deterministic. The GPU tests whose reference side now turns it off (sliced, topk_sum) and
# the bit-equal align test (deterministic: no sliced kernel now); check of both fp8 anchors at
# M = 6..9 on the defaults against fp64; the layer A/B defaults against --no-sliced at M = 6..9
# (two interleaved runs); the bar table at the defaults (final_bars.sh, bars at M = 1..256).
# Prediction on the H200: tests pass; the A/B as this session's first call (--sliced against
# the defaults, M = 6 / 7 / 8 -13.4 / -5.9 / -6.7% Qwen3.5, -5.9 / -2.6 / -3.0% DeepSeek-V3),
# M = 9 equal (the stage path both sides); bars as that call's except Qwen3.5 fp8 M = 8 at about
# 40.1 µs (79.8% of floor_measured, was 74.4%) and DeepSeek-V3 M = 8 about 84.3 µs (88.5%).
set -u
mkdir -p "$OUT"
export MOETUNE_CACHE_DIR=/tmp/moetune-cache
nvidia-smi --query-gpu=name,uuid --format=csv,noheader; cat .devbin/commit.txt
for t in gpu_test_moe_sliced gpu_test_moe_topk_sum gpu_test_moe_align_in_gemm1; do
  timeout 90 ".devbin/$t" --gtest_color=no >"$OUT/$t.txt" 2>&1
  echo "$t rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/$t.txt" | tr '\n' ' ')"
done
i=0
for model in "--model qwen3.5-122b-a10b-fp8 --tp 4" "--model deepseek-v3 --tp 8"; do
  # shellcheck disable=SC2086
  timeout 60 .devbin/moetune check $model --batch 6,7,8,9 --configs 1 >"$OUT/check_$i.txt" 2>&1
  echo "check $i rc=$?: ok $(grep -c '^ok' "$OUT/check_$i.txt"), $(tail -n 1 "$OUT/check_$i.txt")"
  grep -vE "^ok " "$OUT/check_$i.txt" | head -n 5
  i=$((i + 1))
done
# Where Qwen3.5 fp8's time goes at M = 8 (sliced) and 16 (stage kernels): per stage, cold.
timeout 40 .devbin/moetune profile --model qwen3.5-122b-a10b-fp8 --tp 4 --batch 8,16 \
  --measured-ceilings >"$OUT/profile.txt" 2>&1
echo "profile rc=$?"; tail -n 30 "$OUT/profile.txt"
OUT=$OUT/bars FLAGS= BENCH_BATCH=1,8,16,32,64,128,256 CHECK_S=20 timeout -k 5 170 \
  bash bench/scripts/final_bars.sh >"$OUT/bars_console.txt" 2>&1
echo "final_bars: exit $?"; grep -E "^ +(1|8|16|32|64|128|256) |rc=" "$OUT/bars_console.txt"
# The A/B last, in what is left of CALL_S (default 330 s, less 20 for the copy back).
left=$((${CALL_S:-330} - 20 - SECONDS)); [ "$left" -gt 120 ] && left=120; [ "$left" -lt 10 ] && left=10
OUT=$OUT/ab TESTS=none CHECK_BATCH=none RUNS=2 BENCH_BATCH=6,7,8,9 \
  BENCH_MODELS="--model qwen3.5-122b-a10b-fp8 --tp 4;--model deepseek-v3 --tp 8" \
  SIDES="new!measured-ceilings new!no-sliced!measured-ceilings" \
  timeout -k 5 "$left" bash bench/scripts/stage_ab.sh >"$OUT/ab_console.txt" 2>&1
echo "stage_ab: exit $? (limit $left s)"
