#!/bin/bash
# Thirty-seventh session's call (not run: no device came), one call on whichever GPU comes.
# Carry .devbin, made here by
#   bash bench/scripts/pdl_build_devbin.sh            # main: .devbin/moetune (and GPU tests)
#   R=bench/results/2026-12-07_thirtyseventh_session
#   bash bench/scripts/patch_build_devbin.sh $R/sliced_steal.diff steal    # .devbin/steal/
#   bash bench/scripts/patch_build_devbin.sh $R/pair_producer.patch pair   # .devbin/pair/
#   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -I kernels \
#     -o .devbin/steal_copy bench/scripts/decode_probe/steal_copy.cu      # (ring_copy alike)
# and keep .devbin under 46 MB (the call copies at most 64 MiB with the tree): drop the GPU
# tests this call does not run. In order of what matters:
# 1. steal_copy (copies only): do sliced blocks that end early gain by taking GEMM2 units?
# 2. the sliced-steal build: its GPU test, check of both fp8 anchors at M = 6..8 (where the
#    sliced kernel is the default) and --sliced at M = 16 (two waves: no stealing), then the
#    layer A/B main / steal, two interleaved runs. Prediction: -2..-4% at M = 6..8 if the probe
#    gains; M = 16 with --sliced within the spread (no stealing past one wave).
# 3. on an H200: issue 5's bars at main (final_bars.sh; prediction: Qwen3.5 fp8 M = 8 about
#    39.4 µs, 81% of floor_measured; 19 of 21).
# 4. with the time left: ring_copy's pair mode, the pair build's check (M = 16, 32, 128) and
#    its A/B at M = 16, 32.
set -u
FINAL=$OUT; OUT=$FINAL/w; mkdir -p "$OUT"; export OUT
export MOETUNE_CACHE_DIR=/tmp/moetune-cache
nvidia-smi --query-gpu=name,uuid,clocks.max.sm --format=csv,noheader
cat .devbin/commit.txt .devbin/steal/commit.txt
left() { local l=$((${CALL_S:-520} - 20 - SECONDS)); [ "$l" -lt 5 ] && l=5; echo "$l"; }
timeout 40 .devbin/steal_copy >"$OUT/steal_copy.txt" 2>&1
echo "steal_copy rc=$?"; cut -c1-200 "$OUT/steal_copy.txt"
timeout 90 .devbin/steal/gpu_test_moe_sliced --gtest_color=no >"$OUT/gpu_test_steal.txt" 2>&1
echo "gpu_test_moe_sliced (steal) rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' \
  "$OUT/gpu_test_steal.txt" | tr '\n' ' ')"
i=0
for model in "--model qwen3.5-122b-a10b-fp8 --tp 4" "--model deepseek-v3 --tp 8"; do
  # shellcheck disable=SC2086
  timeout 60 .devbin/steal/moetune check $model --batch 6,7,8 --configs 1 >"$OUT/check_$i.txt" 2>&1
  echo "check steal $i rc=$?: ok $(grep -c '^ok' "$OUT/check_$i.txt"),"\
    "$(tail -n 1 "$OUT/check_$i.txt")"
  if [ -z "${QUICK:-}" ]; then  # QUICK=1: no check at M = 16
    # shellcheck disable=SC2086
    timeout 40 .devbin/steal/moetune check $model --batch 16 --sliced --configs 1 \
      >"$OUT/check_s$i.txt" 2>&1
    echo "check steal --sliced $i rc=$?: $(tail -n 1 "$OUT/check_s$i.txt")"
  fi
  grep -hvE "^ok " "$OUT"/check_*"$i".txt | head -n 4
  i=$((i + 1))
done
mkdir -p "$OUT/ab"
OUT=$OUT/ab TESTS=none CHECK_BATCH=none RUNS=2 BENCH_BATCH=${AB_BATCH:-6,7,8} \
  BENCH_MODELS="--model qwen3.5-122b-a10b-fp8 --tp 4;--model deepseek-v3 --tp 8" \
  SIDES="new!measured-ceilings steal!measured-ceilings" \
  timeout -k 5 110 bash bench/scripts/stage_ab.sh >"$OUT/ab_console.txt" 2>&1
echo "stage_ab steal: exit $?"; tail -n 14 "$OUT/ab_console.txt"
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  l=$(left); [ "$l" -gt 200 ] && l=200
  mkdir -p "$OUT/bars"
  OUT=$OUT/bars FLAGS= BENCH_BATCH=1,8,16,32,64,128,256 CHECK_S=20 \
    timeout -k 5 "$l" bash bench/scripts/final_bars.sh >"$OUT/bars_console.txt" 2>&1
  echo "final_bars: exit $? (limit $l s)"
  grep -E "^ +(1|8|16|32|64|128|256) |rc=" "$OUT/bars_console.txt"
fi
if [ "$(left)" -gt 60 ]; then
  RING_COPY_DEEP=1 timeout 40 .devbin/ring_copy >"$OUT/ring_copy_deep.txt" 2>&1
  echo "ring_copy rc=$?"; grep -E "^(cpasync d[12] s4|pair)" "$OUT/ring_copy_deep.txt" | cut -c1-80
fi
if [ -x .devbin/pair/moetune ] && [ "$(left)" -gt 60 ]; then
  timeout 60 .devbin/pair/moetune check --model qwen3.5-122b-a10b-fp8 --tp 4 --batch 16,32,128 \
    --configs 1 >"$OUT/check_pair.txt" 2>&1
  echo "check pair rc=$?: $(tail -n 1 "$OUT/check_pair.txt")"
  mkdir -p "$OUT/abp"
  OUT=$OUT/abp TESTS=none CHECK_BATCH=none RUNS=2 BENCH_BATCH=16,32 \
    BENCH_MODELS="--model qwen3.5-122b-a10b-fp8 --tp 4" \
    SIDES="new!measured-ceilings pair!measured-ceilings" \
    timeout -k 5 "$(left)" bash bench/scripts/stage_ab.sh >"$OUT/abp_console.txt" 2>&1
  echo "stage_ab pair: exit $?"; tail -n 8 "$OUT/abp_console.txt"
fi
tar czf "$FINAL/call.tgz" -C "$FINAL" w && rm -rf "$FINAL/w"
