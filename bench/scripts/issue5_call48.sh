#!/bin/bash
# Issue 5, forty-third session, fourth call (not run: no device came; the next session's first):
# the sliced kernel's trace (gpu_test_moe_sliced's TraceWhereTheTimeGoes with
# MOETUNE_SLICED_TRACE=1), then cp.async's L2 prefetch size on the stage path
# (MOETUNE_CP_ASYNC_L2_PREFETCH=256 on every 16-byte copy; past the sliced kernel's band only the
# stage kernels take it). Call 1 (an H100 SXM) had the fp8 layer -1.2% (Qwen3.5) and -3.4%
# (DeepSeek-V3) at M = 64 and bf16 mixed (M = 8 +1.9%, 16 -1.4%, 64 +0.8%): the stage kernels'
# K-tiles are 128-byte runs per row whose next 128 bytes the same block reads next (ring_copy's
# d1, 3.1% faster with the prefetch). Carry .devbin (`moetune` from pdl_build_devbin.sh).
# Whichever GPU: the layer A/B, defaults against 256 (two interleaved runs), fp8 anchors at
# M = 24, 32, 64, 128, 256, Qwen3.5 bf16 TP4 at M = 8, 16, 32, 64, 128, 256.
# Prediction: fp8 -1..-3% at every M (the weight copies are d1 everywhere), bf16 within ±2%
# (mixed in call 1). On an H200 after that: `--sliced-pairs` against the defaults at M = 8, 16
# (prediction as on the H100 SXM: Qwen3.5 +0.5..+1.5%, DeepSeek-V3 -0..-1.5%) and issue 5's bars
# at the defaults. Env: CALL_S (the command's seconds, default 420; 580 on an H200).
set -u
. "$(dirname "${BASH_SOURCE[0]}")/device_call_lib.sh" || exit 1
budget_call 420
PF=MOETUNE_CP_ASYNC_L2_PREFETCH
# Where a sliced layer's time goes (a trace build: each block's PDL wait, first copy, GEMM1 end
# and exit; both fp8 anchors, plain and pairs, M = 8 and 16, three cold runs each).
MOETUNE_SLICED_TRACE=1 timeout -k 5 "$(cap 120)" .devbin/gpu_test_moe_sliced --gtest_color=no \
  --gtest_filter='*Trace*' >"$OUT/trace.txt" 2>&1
echo "trace: exit $?"; grep -E "^trace |Failure" "$OUT/trace.txt"
# The pairs kernel after its review hardening (writer-side proxy fence, cluster-size trap).
timeout -k 5 "$(cap 30)" .devbin/gpu_test_moe_sliced --gtest_color=no --gtest_filter='*Pairs*' \
  >"$OUT/gpu_test_pairs.txt" 2>&1
echo "gpu_test_moe_sliced Pairs*: exit $?"
grep -E "^\[  (FAILED|PASSED) |Failure" "$OUT/gpu_test_pairs.txt"
anchor_ab ab 170 24,32,64,128,256 "new!measured-ceilings new!measured-ceilings@$PF=256"
mkdir -p "$OUT/bf16"
OUT=$OUT/bf16 TESTS=none CHECK_BATCH=none RUNS=2 BENCH_BATCH=8,16,32,64,128,256 \
  SIDES="new!measured-ceilings new!measured-ceilings@$PF=256" \
  BENCH_MODELS="--model qwen3.5-122b-a10b --tp 4" \
  timeout -k 5 "$(cap 100)" bash bench/scripts/stage_ab.sh >"$OUT/bf16_console.txt" 2>&1
echo "bf16 A/B: exit $?"; grep -vE "exit 0 in" "$OUT/bf16_console.txt" | grep -E "^(===|[0-9])"
if echo "$gpu" | grep -q H200; then
  anchor_ab pairs 110 8,16 "new!measured-ceilings new!measured-ceilings!sliced-pairs"
  bars 150 20
fi
budget_done
