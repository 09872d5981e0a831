#!/bin/bash
# Issue 5, forty-third session, second call: the L2 prefetch size of the sliced kernel's w2
# copies alone (MOETUNE_SLICED_W2_L2_PREFETCH, read by the JIT). Call 1 (an H100 SXM,
# issue5_call45.sh) found 256 on every copy of the sliced kernel slower (+0.7..+3.1% at M = 8..20)
# while ring_copy's 128-byte runs copied 3.1% faster with it and its 256-byte runs 0.4% slower:
# GEMM1's units are 256-byte runs, w2's 128 (the sibling slice reads the other half). Carry
# .devbin (`moetune`, `gpu_test_moe_sliced` from pdl_build_devbin.sh). Whichever GPU:
#   1. gpu_test_moe_sliced with the w2 size at 256 (an illegal-instruction check);
#   2. the layer A/B, defaults against w2 at 256 and at 128 (three interleaved runs) at
#      M = 6, 8, 16, 20 on both fp8 anchors (where the sliced kernel runs on both GPUs);
#   3. on an H200, issue 5's bars with the w2 size at 256 (final_bars.sh).
# Prediction: w2 is a third of the bytes, its copies ~3% faster: the layer -0.5..-1.5% at
# M = 6..8 and 16..20 with 256, 128 within ±0.5%.
# Env: CALL_S (the command's seconds, default 360).
set -u
. "$(dirname "${BASH_SOURCE[0]}")/device_call_lib.sh" || exit 1
budget_call 360
W2=MOETUNE_SLICED_W2_L2_PREFETCH
MOETUNE_SLICED_W2_L2_PREFETCH=256 timeout -k 5 "$(cap 60)" .devbin/gpu_test_moe_sliced \
  --gtest_color=no >"$OUT/gpu_test_sliced_w2_256.txt" 2>&1
echo "gpu_test_moe_sliced (w2 256): exit $?"
grep -E "^\[  (FAILED|PASSED) |Failure|rror" "$OUT/gpu_test_sliced_w2_256.txt" | head -10
anchor_ab ab 200 6,8,16,20 \
  "new!measured-ceilings new!measured-ceilings@$W2=256 new!measured-ceilings@$W2=128" 3
if echo "$gpu" | grep -q H200; then export $W2=256; bars 150 20; unset $W2; fi
budget_done
