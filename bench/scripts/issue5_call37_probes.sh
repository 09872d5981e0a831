#!/bin/bash
# Thirty-seventh session, a short call on either GPU (carry .devbin: pdl_build_devbin.sh at
# 5a79467 or later, ring_copy and steal_copy built as their headers say): the two copy probes
# (predictions in issue5_call37_h200.sh), then the sliced kernel's GPU test and check at
# M = 6..8 on the defaults (5a79467 merged its two mma helpers: bits unchanged).
set -u
FINAL=$OUT; OUT=$OUT/w; mkdir -p "$OUT"
export MOETUNE_CACHE_DIR=/tmp/moetune-cache
nvidia-smi --query-gpu=name,uuid,clocks.max.sm --format=csv,noheader; cat .devbin/commit.txt
timeout 40 .devbin/steal_copy >"$OUT/steal_copy.txt" 2>&1
echo "steal_copy rc=$?"; cut -c1-200 "$OUT/steal_copy.txt"
RING_COPY_DEEP=1 timeout 60 .devbin/ring_copy >"$OUT/ring_copy_deep.txt" 2>&1
echo "ring_copy rc=$?"; grep -E "^(cpasync d[12] s4|pair)" "$OUT/ring_copy_deep.txt" | cut -c1-80
timeout 90 .devbin/gpu_test_moe_sliced --gtest_color=no >"$OUT/gpu_test_moe_sliced.txt" 2>&1
echo "gpu_test_moe_sliced rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/gpu_test_moe_sliced.txt" | tr '\n' ' ')"
i=0
for model in "--model qwen3.5-122b-a10b-fp8 --tp 4" "--model deepseek-v3 --tp 8"; do
  # shellcheck disable=SC2086
  timeout 60 .devbin/moetune check $model --batch 6,7,8 --configs 1 >"$OUT/check_$i.txt" 2>&1
  echo "check $i rc=$?: ok $(grep -c '^ok' "$OUT/check_$i.txt"), $(tail -n 1 "$OUT/check_$i.txt")"
  grep -vE "^ok " "$OUT/check_$i.txt" | head -n 4
  i=$((i + 1))
done
# .devbin/pair/moetune (branch pair-producer: the warp-specialized wgmma kernel's producer
# copies two K-tiles at a time): check, then the layer A/B against main where the stage path runs.
# Prediction: as ring_copy's pair against cpasync d1; if pair matches d2 there, -1.5..-2.5% at
# M = 16..32 (GEMM1 about 2/3 of the layer).
if [ -x .devbin/pair/moetune ]; then
  timeout 60 .devbin/pair/moetune check --model qwen3.5-122b-a10b-fp8 --tp 4 --batch 16,32,128 \
    --configs 1 >"$OUT/check_pair.txt" 2>&1
  echo "check pair rc=$?: $(tail -n 1 "$OUT/check_pair.txt")"
  OUT=$OUT/ab TESTS=none CHECK_BATCH=none RUNS=2 BENCH_BATCH=16,32,64 \
    BENCH_MODELS="--model qwen3.5-122b-a10b-fp8 --tp 4;--model deepseek-v3 --tp 8" \
    SIDES="new!measured-ceilings pair!measured-ceilings" \
    timeout -k 5 "${AB_S:-120}" bash bench/scripts/stage_ab.sh >"$OUT/ab_console.txt" 2>&1
  echo "stage_ab: exit $?"; tail -n 16 "$OUT/ab_console.txt"
fi
tar czf "$FINAL/call.tgz" -C "$FINAL" w && rm -rf "$FINAL/w"
