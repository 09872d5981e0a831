#!/bin/bash
# RECORD (forty-fifth session): MOETUNE_SLICED_STEAL was removed from main after these calls
# (slower; the kernel change is in results/2026-12-08_fortyfifth_session/sliced_steal_v2.diff),
# so the knob is now refused and this script fails at its first step.
# Issue 5, forty-fifth session, after call50: the steal of a931bc1 was correct (GPU test 5 of 5,
# check 8 of 8) and slower (+8..10% on both fp8 anchors at M = 6..20, H100): its trace has the
# blocks' GEMM1 ends closer (max 34 against 38 µs at Qwen3.5 M = 8) and GEMM2 half as slow again
# (median 17.3 against 11.3 µs), every block ending after 47 µs. Suspects: the claim words in
# four 128-byte lines (every owner's claim and every thief's scan, polled each 256 ns, queue at
# one L2 slice), or the claims themselves (a producer barrier per unit, a claim's round trip
# longer than two units). This call: STEAL=1 now has a line per word and polls each 1 µs;
# STEAL=2 claims only (no publish, no stealing). Carry .devbin (pdl_build_devbin.sh at the
# commit that adds them). In order:
#   1. gpu_test_moe_sliced (Qwen3.5's test) with STEAL=1 and 2;
#   2. the layer A/B at M = 8, 16 on both fp8 anchors: defaults, STEAL=1, STEAL=2;
#      predictions: if the hot line was it, STEAL=1 -1..-4%, STEAL=2 within +1%; if the claims
#      were it, STEAL=2 +4..+8% and STEAL=1 no better;
#   3. the trace (both anchors, M = 8, 16) with STEAL=1 and 2;
#   4. on an H200, issue 5's bars at main's defaults (early w13 copies since the last bars).
# Env: CALL_S (default 300; 430 on an H200).
set -u
. "$(dirname "${BASH_SOURCE[0]}")/device_call_lib.sh" || exit 1
budget_call 300
echo "$gpu" | grep -q H200 && budget_s=${CALL_S:-430}
SV=MOETUNE_SLICED_STEAL
for v in 1 2; do
  env $SV=$v timeout -k 5 "$(cap 40)" .devbin/gpu_test_moe_sliced --gtest_color=no \
    --gtest_filter='*MatchesStagePathQwen*' >"$OUT/gpu_test_steal$v.txt" 2>&1
  echo "gpu_test_moe_sliced $SV=$v: exit $?"
  grep -E "^\[  (FAILED|PASSED) |Failure" "$OUT/gpu_test_steal$v.txt" | head -4
done
anchor_ab steal2 130 8,16 \
  "new!measured-ceilings new!measured-ceilings@$SV=1 new!measured-ceilings@$SV=2"
for v in 1 2; do
  env $SV=$v MOETUNE_SLICED_TRACE=1 timeout -k 5 "$(cap 40)" .devbin/gpu_test_moe_sliced \
    --gtest_color=no --gtest_filter='*Trace*' >"$OUT/trace_s$v.txt" 2>&1
  echo "trace $SV=$v: exit $?"; grep -E "^trace .*run 0" "$OUT/trace_s$v.txt" | grep -v -i pair
done
echo "$gpu" | grep -q H200 && bars 160 20
budget_done
