#!/bin/bash
# Thirty-fourth session, one device call on an H100 or H200 (carry .devbin from
# pdl_build_devbin.sh): the sliced kernel deriving the alignment itself (M * topk <= 256; the
# routing launch zeroes its counters, no alignment launch). First its GPU test (deriving and
# reading the tables, from logits and from precomputed ids, poisoned workspace) and check
# --sliced against fp64 on both fp8 anchors; then the layer A/B: defaults, --sliced (deriving),
# --sliced --no-align-in-gemm1 (the tables, as the thirty-third session's kernel), at
# M = 8, 16, 24, 32, three interleaved runs.
# Prediction (H100 SXM): deriving against the tables −1.0..−1.5 µs at M = 8..32 (the align
# launch's ablation), so Qwen3.5 fp8 M = 8 about 51.5 µs against the defaults' 54.1 on the
# thirty-fourth session's GPU (about 87% of floor_measured); M = 16..32 still behind the defaults
# by 0..1.5%.
set -u
mkdir -p "$OUT"
export MOETUNE_CACHE_DIR=/tmp/moetune-cache
gpu=$(nvidia-smi --query-gpu=name,uuid --format=csv,noheader | head -n 1)
echo "gpu: $gpu"; cat .devbin/commit.txt
timeout 120 .devbin/gpu_test_moe_sliced --gtest_color=no >"$OUT/test_sliced.txt" 2>&1
echo "gpu_test_moe_sliced rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/test_sliced.txt" | tr '\n' ' ')"
grep -E "^(ok|FAIL) " "$OUT/test_sliced.txt" | head -40
i=0
for model in "--model qwen3.5-122b-a10b-fp8 --tp 4" "--model deepseek-v3 --tp 8"; do
  # shellcheck disable=SC2086
  timeout 90 .devbin/moetune check $model --sliced --batch 8,16,24,32 --configs 1 \
    >"$OUT/check_$i.txt" 2>&1
  echo "check $i rc=$?: ok $(grep -c '^ok' "$OUT/check_$i.txt"), $(tail -n 1 "$OUT/check_$i.txt")"
  grep -vE "^ok " "$OUT/check_$i.txt" | head -n 5
  i=$((i + 1))
done
OUT=$OUT/ab TESTS=none CHECK_BATCH=none RUNS=${AB_RUNS:-3} BENCH_BATCH=8,16,24,32 \
  BENCH_MODELS="--model qwen3.5-122b-a10b-fp8 --tp 4;--model deepseek-v3 --tp 8" \
  SIDES="new!measured-ceilings new!sliced!measured-ceilings new!sliced!no-align-in-gemm1!measured-ceilings" \
  timeout -k 5 240 bash bench/scripts/stage_ab.sh >"$OUT/ab_console.txt" 2>&1
echo "stage_ab: exit $?"
tail -n 30 "$OUT/ab_console.txt"
