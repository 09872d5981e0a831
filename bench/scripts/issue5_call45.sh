#!/bin/bash
# Issue 5, forty-third session: cp.async's L2 prefetch size (MOETUNE_CP_ASYNC_L2_PREFETCH, read by
# the JIT: the same binary compiles both forms). Carry .devbin: `moetune` and
# `gpu_test_moe_sliced` from bench/scripts/pdl_build_devbin.sh, and `ring_copy` /
# `ring_copy_pf256` by nvcc (bench/scripts/decode_probe/ring_copy.cu, sm_90a; the second with
# -DRING_CP='"cp.async.cg.shared.global.L2::256B"'). Whichever GPU:
#   1. gpu_test_moe_sliced with the size at 256 (a prefetch hint cannot change a value; this
#      catches an illegal instruction, as the ninth session's L2 cache hint was);
#   2. ring_copy RING_COPY_PF=1, both builds: the copies alone (d1: 128-byte runs as w2's and the
#      stage path's K-tiles, d2: 256-byte runs as the sliced kernel's GEMM1, cont, tma);
#   3. the layer A/B, defaults against 256 (two interleaved runs) at M = 6, 8, 16, 20, 64 on both
#      fp8 anchors, then on Qwen3.5 bf16 TP4 at M = 8, 16, 64;
#   4. on an H200, issue 5's bars with the size at 256 (final_bars.sh).
# Prediction: copies d1 -2..-5% with 256 (the tma mode's edge over cp.async on an H200 was
# +2.3%, with that promotion), d2 and cont within ±1%; the layer -1..-3% where the sliced kernel
# runs (M = 6..8, 16, 20: w2's third of the bytes is 128-byte runs), -1..-4% on the stage path
# (M = 64), bf16 the same sign. Env: CALL_S (the command's seconds, default 420).
set -u
. "$(dirname "${BASH_SOURCE[0]}")/device_call_lib.sh" || exit 1
budget_call 420
PF=MOETUNE_CP_ASYNC_L2_PREFETCH
MOETUNE_CP_ASYNC_L2_PREFETCH=256 timeout -k 5 "$(cap 60)" .devbin/gpu_test_moe_sliced \
  --gtest_color=no >"$OUT/gpu_test_sliced_pf256.txt" 2>&1
echo "gpu_test_moe_sliced (256): exit $?"
grep -E "^\[  (FAILED|PASSED) |Failure|rror" "$OUT/gpu_test_sliced_pf256.txt" | head -10
for b in ring_copy ring_copy_pf256; do
  RING_COPY_PF=1 timeout -k 5 "$(cap 40)" ".devbin/$b" >"$OUT/$b.txt" 2>&1
  echo "$b: exit $?"; sed -e 's/ | .*//' "$OUT/$b.txt"
done
anchor_ab ab 170 6,8,16,20,64 "new!measured-ceilings new!measured-ceilings@$PF=256"
mkdir -p "$OUT/bf16"
OUT=$OUT/bf16 TESTS=none CHECK_BATCH=none RUNS=2 BENCH_BATCH=8,16,64 \
  SIDES="new!measured-ceilings new!measured-ceilings@$PF=256" \
  BENCH_MODELS="--model qwen3.5-122b-a10b --tp 4" \
  timeout -k 5 "$(cap 70)" bash bench/scripts/stage_ab.sh >"$OUT/bf16_console.txt" 2>&1
echo "bf16 A/B: exit $?"; grep -vE "exit 0 in" "$OUT/bf16_console.txt" | grep -E "^(===|[0-9])"
if echo "$gpu" | grep -q H200; then export $PF=256; bars 150 20; unset $PF; fi
budget_done
