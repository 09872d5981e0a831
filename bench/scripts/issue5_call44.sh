#!/bin/bash
# Issue 5, forty-second session: the balanced sliced kernel (`--sliced-balanced`,
# kernels/moe_gemms_sliced_balanced_sm90a.cuh: the sliced layer's units spread evenly over one
# block per SM, slices cut between blocks exchanging partial sums and activations). Ran once, on
# an H200 at 2f21b95 (bench/results/2026-12-07_fortysecond_session.md: correct, 13..31% slower);
# the kernel is no longer on main: to rerun, `git apply` that session's sliced_balanced.diff on
# f77a0bb and carry .devbin with `moetune` and `gpu_test_moe_sliced` built from it by
# bench/scripts/pdl_build_devbin.sh. Whichever GPU:
#   1. gpu_test_moe_sliced's Balanced* cases (against the stage path, graphs, precomputed ids,
#      skewed routing, EP) and `check --sliced-balanced` at M = 6, 8, 16, 20 (fp64 reference);
#   2. the layer A/B, defaults against --sliced-balanced (two interleaved runs) at M = 6, 8, 14,
#      16, 20, 24 on both fp8 anchors, where the defaults run the one-slice sliced kernel
#      (H100 SXM M = 6..8, 14..24; H200 6..8, 14..20; elsewhere both sides are the stage path).
#   3. the same at M = 10, 12 against the stage path (`--sliced --sliced-balanced`);
#   4. on an H200 only, after 1..3: issue 5's bars at the defaults (final_bars.sh).
# Prediction: 114 blocks copy 3-8% slower than every SM busy (ring_copy: H200 3.88-3.94 against
# 4.0-4.2 TB/s, H100 SXM dyn-3 -5.3%), less the exchanges (a 16 KB partial and a 2 KB activation
# a cut slice): H100 SXM -1..-4% at M = 6..8 and 14..24; H200 -3..-7% at M = 8 (Qwen3.5 fp8 from
# about 38.5 to 36-37 µs: 86-88% of floor_measured), -2..-5% at M = 16.
# Env: CALL_S (the command's seconds, default 330).
set -u
. "$(dirname "${BASH_SOURCE[0]}")/device_call_lib.sh" || exit 1
budget_call 330
timeout -k 5 "$(cap 90)" .devbin/gpu_test_moe_sliced --gtest_color=no \
  --gtest_filter='*Balanced*' >"$OUT/gpu_test_balanced.txt" 2>&1
echo "gpu_test_moe_sliced Balanced*: exit $?"
grep -E "^(ok|FAIL) |^\[  (FAILED|PASSED) |Failure" "$OUT/gpu_test_balanced.txt" | head -40
for m in "--model qwen3.5-122b-a10b-fp8 --tp 4" "--model deepseek-v3 --tp 8"; do
  # shellcheck disable=SC2086
  timeout -k 5 "$(cap 40)" .devbin/moetune check $m --batch 6,8,16,20 --configs 1 --sliced \
    --sliced-balanced >>"$OUT/check_balanced.txt" 2>&1
  echo "check --sliced-balanced ($m): exit $?"
done
echo "check: ok $(grep -c '^ok' "$OUT/check_balanced.txt"), not ok:"
grep -vE "^ok " "$OUT/check_balanced.txt" | grep -iE "fail|not ok|error" | head -8
anchor_ab ab 150 6,8,14,16,20,24 "new!measured-ceilings new!measured-ceilings!sliced-balanced"
# Where the defaults run the stage path (a one-slice grid of 1.2..1.3 or 2.4+ waves): balanced
# has no waves. Prediction: H100 SXM M = 10, 12 -0..-4% against the stage path (M >= 28: the
# alignment's worst case, 448+ slices, exceeds 3 x 132 and the balanced kernel does not run).
anchor_ab ab2 100 10,12 "new!measured-ceilings new!measured-ceilings!sliced!sliced-balanced"
if echo "$gpu" | grep -q H200; then bars 200 20; fi
budget_done
