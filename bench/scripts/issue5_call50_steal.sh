#!/bin/bash
# RECORD (forty-fifth session): MOETUNE_SLICED_STEAL was removed from main after these calls
# (slower; the kernel change is in results/2026-12-08_fortyfifth_session/sliced_steal_v2.diff),
# so the knob is now refused and this script fails at its first step.
# Issue 5, forty-fifth session: the sliced kernel's work stealing (MOETUNE_SLICED_STEAL=1: GEMM2's
# units claimed two ahead of their copies, a block with none left taking units of the ready
# block with the most left), its first GPU run. Carry .devbin (`moetune`, `gpu_test_moe_sliced`
# from pdl_build_devbin.sh at the commit that adds the knob). In order:
#   1. gpu_test_moe_sliced with STEAL=1 (pairs and trace excluded: the knob leaves pairs alone);
#      a hang shows as its timeout;
#   2. `check` with STEAL=1 at M = 6, 8, 16, 20 on both fp8 anchors;
#   3. the layer A/B at M = 6, 8, 16, 20 on both fp8 anchors: defaults against STEAL=1.
#      Predictions: -2..-5% at M = 6..8 (one wave: the trace's exits spread 3-5 µs from median
#      to max of ~45 on an H100, less what the victims' rings hold claimed), -1..-3% at 16, 20;
#   4. on an H200, issue 5's bars, with STEAL=1 where steps 1 and 2 were clean.
# Env: CALL_S (the command's seconds, default 300; 520 on an H200).
set -u
. "$(dirname "${BASH_SOURCE[0]}")/device_call_lib.sh" || exit 1
budget_call 300
echo "$gpu" | grep -q H200 && budget_s=${CALL_S:-520}
SV=MOETUNE_SLICED_STEAL
env $SV=1 timeout -k 5 "$(cap 80)" .devbin/gpu_test_moe_sliced --gtest_color=no \
  --gtest_filter='-*Pair*:*Trace*' >"$OUT/gpu_test_steal.txt" 2>&1
echo "gpu_test_moe_sliced $SV=1: exit $?"
grep -E "^\[  (FAILED|PASSED) |Failure" "$OUT/gpu_test_steal.txt" | head -8
clean=1
grep -q "^\[  PASSED  \]" "$OUT/gpu_test_steal.txt" || clean=0
grep -q "^\[  FAILED  \]" "$OUT/gpu_test_steal.txt" && clean=0
for m in "--model qwen3.5-122b-a10b-fp8 --tp 4" "--model deepseek-v3 --tp 8"; do
  # shellcheck disable=SC2086
  env $SV=1 timeout -k 5 "$(cap 50)" .devbin/moetune check $m --batch 6,8,16,20 --configs 1 \
    --layer-only >>"$OUT/check_steal.txt" 2>&1
  rc=$?; echo "check $SV=1 ($m): exit $rc"; [ "$rc" = 0 ] || clean=0
done
echo "check steal: ok $(grep -c '^ok' "$OUT/check_steal.txt")"
grep -vE "^ok " "$OUT/check_steal.txt" | grep -iE "fail|not ok|error" | head -6
grep -vE "^ok " "$OUT/check_steal.txt" | grep -qiE "fail|not ok|error" && clean=0
echo "clean: $clean"
[ "$clean" = 1 ] && anchor_ab steal 200 6,8,16,20 "new!measured-ceilings new!measured-ceilings@$SV=1"
if echo "$gpu" | grep -q H200; then
  [ "$clean" = 1 ] && { echo "bars with $SV=1"; export $SV=1; }
  bars 170 20
fi
budget_done
