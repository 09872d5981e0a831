#!/bin/bash
# Thirty-sixth session, one call on an H200 or H100 SXM (carry .devbin from pdl_build_devbin.sh
# at 0a7c4fd or later, .devbin/prev/moetune the build before it): the sliced kernel's GEMM1 units
# of 128 rows x 256 deep. gpu_test_moe_sliced (against the stage path), check of both fp8
# anchors at M = 6..8 (the sliced kernel is the default there) and with --sliced at M = 16;
# the layer A/B prev / new at M = 6, 7, 8 (the default) and
# with --sliced at M = 16 (two interleaved runs).
# Prediction: tests pass; w13 is 2/3 of the kernel's bytes and copies ~4.8% faster this way
# (ring_copy d2), so the layer -2.5..-3.5% at Qwen3.5 fp8 M = 8 (H200: 40.1 -> ~38.9 µs),
# -2..-3% on DeepSeek-V3, about -2% with --sliced at M = 16.
set -u
# Everything lands in $OUT/call.tgz (the device returns few files).
FINAL=$OUT; OUT=$OUT/w; mkdir -p "$OUT"
export MOETUNE_CACHE_DIR=/tmp/moetune-cache
nvidia-smi --query-gpu=name,uuid,clocks.max.sm --format=csv,noheader; cat .devbin/commit.txt
timeout 90 .devbin/gpu_test_moe_sliced --gtest_color=no >"$OUT/gpu_test_moe_sliced.txt" 2>&1
echo "gpu_test_moe_sliced rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/gpu_test_moe_sliced.txt" | tr '\n' ' ')"
i=0
for model in "--model qwen3.5-122b-a10b-fp8 --tp 4" "--model deepseek-v3 --tp 8"; do
  # shellcheck disable=SC2086
  timeout 60 .devbin/moetune check $model --batch 6,7,8 --configs 1 >"$OUT/check_$i.txt" 2>&1
  echo "check $i rc=$?: ok $(grep -c '^ok' "$OUT/check_$i.txt"), $(tail -n 1 "$OUT/check_$i.txt")"
  # shellcheck disable=SC2086
  timeout 60 .devbin/moetune check $model --batch 16 --sliced --configs 1 >"$OUT/check_s$i.txt" 2>&1
  echo "check --sliced $i rc=$?: $(tail -n 1 "$OUT/check_s$i.txt")"
  grep -hvE "^ok " "$OUT/check_$i.txt" "$OUT/check_s$i.txt" | head -n 4
  i=$((i + 1))
done
OUT=$OUT/ab TESTS=none CHECK_BATCH=none RUNS=2 BENCH_BATCH=6,7,8 \
  BENCH_MODELS="--model qwen3.5-122b-a10b-fp8 --tp 4;--model deepseek-v3 --tp 8" \
  SIDES="prev!measured-ceilings new!measured-ceilings" \
  timeout -k 5 100 bash bench/scripts/stage_ab.sh >"$OUT/ab_console.txt" 2>&1
echo "stage_ab 1: exit $?"
OUT=$OUT/ab16 TESTS=none CHECK_BATCH=none RUNS=2 BENCH_BATCH=16 \
  BENCH_MODELS="--model qwen3.5-122b-a10b-fp8 --tp 4;--model deepseek-v3 --tp 8" \
  SIDES="prev!sliced!measured-ceilings new!sliced!measured-ceilings" \
  timeout -k 5 80 bash bench/scripts/stage_ab.sh >"$OUT/ab16_console.txt" 2>&1
echo "stage_ab 2: exit $?"
tail -n 40 "$OUT/ab_console.txt"; tail -n 20 "$OUT/ab16_console.txt"
tar czf "$FINAL/call.tgz" -C "$FINAL" w && rm -rf "$FINAL/w"
