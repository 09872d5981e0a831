#!/bin/bash
# RECORD (forty-fourth session): `--sliced-pair-claims` was removed after it hung on its first
# GPU run (call 1 of that session), so the claims steps below now fail at once.
# Issue 5, prepared in the forty-third session (not run: no device came after its call 3). Carry
# .devbin (`moetune` and `gpu_test_moe_sliced` from pdl_build_devbin.sh at main). In order,
# whichever GPU:
#   1. the sliced kernel's trace (gpu_test_moe_sliced's TraceWhereTheTimeGoes with
#      MOETUNE_SLICED_TRACE=1: per block the PDL wait's return, the first copy, GEMM1's end and
#      the exit; both fp8 anchors, plain / pairs / pairs that claim, M = 8 and 16);
#   2. the pairs' GPU tests after the review hardening, and the claiming pairs' (new, never on a
#      GPU: gpu_test_moe_sliced PairClaims*, then `check --sliced-pair-claims` at M = 6, 8, 16,
#      20 against fp64);
#   3. the layer A/B at M = 6, 8, 16, 20 on both fp8 anchors: defaults, --sliced-pairs,
#      --sliced-pair-claims. Prediction: the claims -0.5..-2% against the static pairs on
#      Qwen3.5 (whose +1.2% at M = 8 on an H100 SXM was put on the pair's coupling) and 0..-1% on
#      DeepSeek-V3;
#   4. cp.async's L2 prefetch size on the stage path (MOETUNE_CP_ASYNC_L2_PREFETCH=256; past the
#      sliced kernel's band only the stage kernels take it): fp8 anchors at M = 24..256, Qwen3.5
#      bf16 TP4 at M = 8..256. Call 1 (an H100 SXM) had fp8 -1.2% (Qwen3.5) / -3.4% (DeepSeek-V3)
#      at M = 64, bf16 mixed; the stage kernels' K-tiles are 128-byte runs whose next 128 bytes
#      the same block reads next (ring_copy's d1: 3.1% faster with it). Prediction: fp8 -1..-3%
#      at every M, bf16 within ±2%;
#   5. on an H200, issue 5's bars at the defaults.
# Env: CALL_S (the command's seconds, default 480; 590 on an H200).
set -u
. "$(dirname "${BASH_SOURCE[0]}")/device_call_lib.sh" || exit 1
budget_call 480
PF=MOETUNE_CP_ASYNC_L2_PREFETCH
# The default kernel's source changed after the last device check (smem layout, PAIR argument).
for m in "--model qwen3.5-122b-a10b-fp8 --tp 4" "--model deepseek-v3 --tp 8"; do
  # shellcheck disable=SC2086
  timeout -k 5 "$(cap 40)" .devbin/moetune check $m --batch 1,6,8,16,20,64 --configs 1 \
    --layer-only >>"$OUT/check_defaults.txt" 2>&1
  echo "check defaults ($m): exit $?"
done
echo "check defaults: ok $(grep -c '^ok' "$OUT/check_defaults.txt")"
grep -vE "^ok " "$OUT/check_defaults.txt" | grep -iE "fail|not ok|error" | head -8
MOETUNE_SLICED_TRACE=1 timeout -k 5 "$(cap 120)" .devbin/gpu_test_moe_sliced --gtest_color=no \
  --gtest_filter='*Trace*' >"$OUT/trace.txt" 2>&1
echo "trace: exit $?"; grep -E "^trace |Failure" "$OUT/trace.txt"
timeout -k 5 "$(cap 60)" .devbin/gpu_test_moe_sliced --gtest_color=no \
  --gtest_filter='*Pairs*:*PairClaims*' >"$OUT/gpu_test_pairs.txt" 2>&1
echo "gpu_test_moe_sliced Pairs* PairClaims*: exit $?"
grep -E "^\[  (FAILED|PASSED) |Failure" "$OUT/gpu_test_pairs.txt"
for m in "--model qwen3.5-122b-a10b-fp8 --tp 4" "--model deepseek-v3 --tp 8"; do
  # shellcheck disable=SC2086
  timeout -k 5 "$(cap 40)" .devbin/moetune check $m --batch 6,8,16,20 --configs 1 --sliced \
    --sliced-pair-claims >>"$OUT/check_claims.txt" 2>&1
  echo "check --sliced-pair-claims ($m): exit $?"
done
echo "check: ok $(grep -c '^ok' "$OUT/check_claims.txt"), not ok:"
grep -vE "^ok " "$OUT/check_claims.txt" | grep -iE "fail|not ok|error" | head -8
pair_sides="new!measured-ceilings new!measured-ceilings!sliced-pairs"
pair_sides+=" new!measured-ceilings!sliced-pair-claims"
anchor_ab pairs 130 6,8,16,20 "$pair_sides"
anchor_ab ab 170 24,32,64,128,256 "new!measured-ceilings new!measured-ceilings@$PF=256"
mkdir -p "$OUT/bf16"
OUT=$OUT/bf16 TESTS=none CHECK_BATCH=none RUNS=2 BENCH_BATCH=8,16,32,64,128,256 \
  SIDES="new!measured-ceilings new!measured-ceilings@$PF=256" \
  BENCH_MODELS="--model qwen3.5-122b-a10b --tp 4" \
  timeout -k 5 "$(cap 100)" bash bench/scripts/stage_ab.sh >"$OUT/bf16_console.txt" 2>&1
echo "bf16 A/B: exit $?"; grep -vE "exit 0 in" "$OUT/bf16_console.txt" | grep -E "^(===|[0-9])"
if echo "$gpu" | grep -q H200; then bars 150 20; fi
budget_done
