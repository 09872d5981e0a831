#!/bin/bash
# Thirty-third session, one device call (carry .devbin built by pdl_build_devbin.sh): the sliced
# GEMM kernel (`--sliced`, kernels/moe_gemms_sliced_sm90a.cuh) on its first GPU.
#   1. gpu_test_moe_sliced: the layer with it against the stage path (both fp8 anchors, M = 1..64,
#      skewed routing, EP rank 1 of 2, graphs, GEMM phases between calls);
#   2. `moetune check --sliced` (fp64) at CHECK_BATCH (default 8,16,32) on both fp8 anchors;
#   3. the layer A/B default / --sliced at BENCH_BATCH (default 8,16,32,64) on both fp8 anchors,
#      RUNS interleaved runs (default 2), via stage_ab.sh.
# Prediction (H100 SXM or H200): Qwen3.5 fp8 TP4 M = 8 -2..-5 µs (-4..-9%); DeepSeek-V3 M = 8
# -2..-5 µs; M = 16..64 smaller, or a loss where the grid of one block per SM takes 2-4 waves.
# SKIP_TESTS=1 skips 1 and 2. Output: $OUT/*.txt, $OUT/ab/ab_call.tgz; a short table last.
set -u
mkdir -p "$OUT"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
echo "gpu: $gpu"; cat .devbin/commit.txt
export MOETUNE_CACHE_DIR=/tmp/moetune-cache
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  timeout 300 .devbin/gpu_test_moe_sliced --gtest_color=no >"$OUT/test_sliced.txt" 2>&1
  echo "gpu_test_moe_sliced rc=$?"
  grep -E "^(ok|FAIL) |^\[  (PASSED|FAILED) |Failure" "$OUT/test_sliced.txt" | head -n 40
  i=0
  for model in "--model qwen3.5-122b-a10b-fp8 --tp 4" "--model deepseek-v3 --tp 8"; do
    # shellcheck disable=SC2086
    timeout 120 .devbin/moetune check $model --sliced --batch "${CHECK_BATCH:-8,16,32}" \
      --configs 1 >"$OUT/check_$i.txt" 2>&1
    echo "check $i rc=$?: ok $(grep -c '^ok' "$OUT/check_$i.txt"), $(tail -n 1 "$OUT/check_$i.txt")"
    grep -vE "^ok " "$OUT/check_$i.txt" | head -n 8
    i=$((i + 1))
  done
fi
OUT=$OUT/ab TESTS=none CHECK_BATCH=none RUNS=${RUNS:-2} BENCH_BATCH=${BENCH_BATCH:-8,16,32,64} \
  BENCH_MODELS="--model qwen3.5-122b-a10b-fp8 --tp 4;--model deepseek-v3 --tp 8" \
  SIDES="new!measured-ceilings new!sliced!measured-ceilings" \
  timeout -k 5 360 bash bench/scripts/stage_ab.sh >"$OUT/ab_console.txt" 2>&1
echo "stage_ab: exit $?"
tail -n 40 "$OUT/ab_console.txt"
