#!/bin/bash
# Thirtieth session, one device call on either GPU (carry .devbin: `new` = 72c995f, the H100 SXM's
# fused band ending at spe 0.5 with 4 stages and align-in-gemm1 by default where GEMM1 fuses;
# `prev` = d3adfa8, before them). About 4 minutes on an H100, 6 on an H200.
# - On an H100 SXM: the align-in-gemm1 and PDL GPU tests; `check` of both fp8 anchors at
#   M = 8..32 with the new defaults (align now on there) against fp64; then the layer A/B prev,
#   new and new without align at M = 8..32, three interleaved runs. Prediction (call 3 of the
#   twenty-ninth session): new against prev Qwen3.5 -0.9 / 0 / -2.8 / -2.3 / -1.1 / -0.9% at
#   M = 8 / 12 / 16 / 20 / 24 / 32, DeepSeek-V3 -0.8 / 0 / -2.5 / -1.5 / -0.6 / -0.5%; without
#   align, M = 16 / 20 -1.6 / -1.5% and -2.0 / -1.0%, elsewhere as prev.
# - On an H200 (defaults unchanged there): issue 5's bars at M = 1..256 (final_bars.sh), then
#   whether the H100's two new rules win there too: --align-in-gemm1 and the fused s4 table (f4 of
#   bench/tables/fp8_up_fused_band) at M = 8..32, three runs. Prediction: bars as the
#   twenty-fifth session within the spread; align -0.5..-1% where fused (M = 8, 24..32), f4 at
#   M = 16 / 20 unknown (s3 there lost +0.3% / +1.9% at M = 16 on the H200). Since the
#   thirty-fourth session also --sliced (the sliced GEMM kernel deriving the alignment, the
#   H100's default at M = 6..8, where it won -13 / -5 / -5% on Qwen3.5 and -6 / 0 / -1.4% on
#   DeepSeek-V3): prediction on the H200 (132 SMs too, faster memory) a win at M = 6..8 of
#   about the same size, a loss at M >= 16; if so, drop the h100_sxm guard of
#   moetune_default_sliced_gemms (src/config/moetune_default.cpp).
# H200_ONLY=1: on any other GPU stop at once (the H100 half is done: thirty-first session).
# SKIP_BARS=1: on an H200 only the A/B of the two H100 rules (about 2 minutes with AB_RUNS=1).
# AB_RUNS (default 3): interleaved runs of each A/B side, fewer when device time is short.
# CALL_S (default 600): the call's time limit, which bounds the A/B (it runs last).
# Output: $OUT/*.tgz and consoles; a short table last.
set -u
mkdir -p "$OUT"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
echo "gpu: $gpu"; cat .devbin/commit.txt; cat .devbin/prev/commit.txt 2>/dev/null
T=bench/tables/fp8_up_fused_band
M2="--model qwen3.5-122b-a10b-fp8 --tp 4;--model deepseek-v3 --tp 8"
export MOETUNE_CACHE_DIR=/tmp/moetune-cache
if [[ "$gpu" != *H200* && "${H200_ONLY:-0}" == 1 ]]; then
  echo "H200_ONLY: not an H200, nothing run"; exit 0
fi
if [[ "$gpu" == *H200* && "${SKIP_BARS:-0}" != 1 ]]; then
  OUT=$OUT/bars FLAGS= BENCH_BATCH=1,8,16,32,64,128,256 CHECK_S=120 timeout -k 5 300 \
    bash bench/scripts/final_bars.sh >"$OUT/bars_console.txt" 2>&1
  echo "final_bars: exit $?"; tail -n 40 "$OUT/bars_console.txt"
fi
if [[ "$gpu" == *H200* ]]; then
  timeout 60 .devbin/moetune check --model qwen3.5-122b-a10b-fp8 --tp 4 --align-in-gemm1 \
    --batch 8,16,20,24,32 --configs 1 >"$OUT/check_align.txt" 2>&1
  echo "check align rc=$?: $(tail -n 1 "$OUT/check_align.txt")"
  # The sliced kernel on the H200: its GPU test (and the persistent one's, whose helpers moved
  # to test_moe_common.hpp in the thirty-fourth session) and check --sliced against fp64.
  for t in gpu_test_moe_sliced gpu_test_moe_persistent; do
    [ -x ".devbin/$t" ] || continue
    timeout 60 ".devbin/$t" --gtest_color=no >"$OUT/$t.txt" 2>&1
    echo "$t rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/$t.txt" | head -n 3 | tr '\n' ' ')"
  done
  timeout 60 .devbin/moetune check --model qwen3.5-122b-a10b-fp8 --tp 4 --sliced \
    --batch 8,16,32,64 --configs 1 >"$OUT/check_sliced.txt" 2>&1
  echo "check sliced rc=$?: $(tail -n 1 "$OUT/check_sliced.txt")"
  # What is left of the call (CALL_S, default 600 s, less 30 for the copy back) bounds the A/B.
  left=$((${CALL_S:-600} - 30 - SECONDS)); [ "$left" -gt 300 ] && left=300
  [ "$left" -lt 20 ] && left=20
  OUT=$OUT/ab TESTS=none CHECK_BATCH=none RUNS=${AB_RUNS:-3} BENCH_BATCH=6,7,8,16,20,24,32 BENCH_MODELS="$M2" \
    SIDES="new!measured-ceilings new!align-in-gemm1!measured-ceilings new!measured-ceilings+$T/f4.json new!align-in-gemm1!measured-ceilings+$T/f4.json new!sliced!measured-ceilings" \
    timeout -k 5 "$left" bash bench/scripts/stage_ab.sh >"$OUT/ab_console.txt" 2>&1
  echo "stage_ab: exit $? (limit ${left} s)"
else
  for t in gpu_test_moe_align_in_gemm1 gpu_test_moe_pdl; do
    timeout 150 ".devbin/$t" --gtest_color=no >"$OUT/$t.txt" 2>&1
    echo "$t rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/$t.txt" | head -n 3 | tr '\n' ' ')"
  done
  i=0
  for model in "--model qwen3.5-122b-a10b-fp8 --tp 4" "--model deepseek-v3 --tp 8"; do
    # shellcheck disable=SC2086
    timeout 90 .devbin/moetune check $model --batch 8,12,16,20,24,32 --configs 1 \
      >"$OUT/check_$i.txt" 2>&1
    echo "check $i rc=$?: ok $(grep -c '^ok' "$OUT/check_$i.txt"), $(tail -n 1 "$OUT/check_$i.txt")"
    grep -vE "^ok " "$OUT/check_$i.txt" | head -n 5
    i=$((i + 1))
  done
  OUT=$OUT/ab TESTS=none CHECK_BATCH=none RUNS=${AB_RUNS:-3} BENCH_BATCH=8,12,16,20,24,32 \
    BENCH_MODELS="$M2" \
    SIDES="prev!measured-ceilings new!measured-ceilings new!no-align-in-gemm1!measured-ceilings" \
    timeout -k 5 300 bash bench/scripts/stage_ab.sh >"$OUT/ab_console.txt" 2>&1
  echo "stage_ab: exit $?"
fi
nvidia-smi --query-gpu=name,uuid,clocks.max.sm,clocks.max.mem --format=csv
