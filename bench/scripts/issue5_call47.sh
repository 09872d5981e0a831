#!/bin/bash
# Issue 5, forty-third session, third call: the sliced kernel in pairs (`--sliced-pairs`: the
# m-block's two slices as a cluster of two blocks that swap activation halves through
# distributed shared memory after GEMM1, each then running GEMM2 over the whole intermediate for
# half of out's columns: w2 rows in 256-byte runs, one add per expert into out instead of two).
# Carry .devbin (`moetune`, `gpu_test_moe_sliced` from pdl_build_devbin.sh). Whichever GPU:
#   1. gpu_test_moe_sliced (the Pairs* cases against the stage path: Qwen3.5 M = 1..64,
#      DeepSeek-V3 M = 3..33, skewed routing, the tables, EP rank 1 of 2; graphs, repeated
#      calls, precomputed ids, the GEMM phase's own output), and `check --sliced-pairs` at
#      M = 6, 8, 16, 20 on both fp8 anchors (fp64 reference);
#   2. the layer A/B, defaults against --sliced-pairs (three interleaved runs) at M = 6, 8, 16, 20
#      on both fp8 anchors;
#   3. on an H200, issue 5's bars with --sliced-pairs (final_bars.sh, FLAGS).
# Prediction: w2 is a third of the bytes; 256-byte runs copied 3-5% faster than 128-byte ones in
# ring_copy (H100 SXM d2 against d1: -2.9..-4.8%), less the pair's coupling at GEMM1's end (the
# faster block waits for its partner's activation while its producer fills the ring with w2):
# the layer -0.5..-1.5% at M = 6..8 and 16..20 (Qwen3.5 fp8 on an H200: M = 8 about 37.6 µs,
# 85% of floor_measured). Env: CALL_S (the command's seconds, default 420).
set -u
. "$(dirname "${BASH_SOURCE[0]}")/device_call_lib.sh" || exit 1
budget_call 420
timeout -k 5 "$(cap 90)" .devbin/gpu_test_moe_sliced --gtest_color=no \
  >"$OUT/gpu_test_sliced.txt" 2>&1
echo "gpu_test_moe_sliced: exit $?"
grep -E "^\[  (FAILED|PASSED) |Failure|rror|^\[ +(OK|FAILED) " "$OUT/gpu_test_sliced.txt" | head -20
for m in "--model qwen3.5-122b-a10b-fp8 --tp 4" "--model deepseek-v3 --tp 8"; do
  # shellcheck disable=SC2086
  timeout -k 5 "$(cap 40)" .devbin/moetune check $m --batch 6,8,16,20 --configs 1 --sliced \
    --sliced-pairs >>"$OUT/check_pairs.txt" 2>&1
  echo "check --sliced-pairs ($m): exit $?"
done
echo "check: ok $(grep -c '^ok' "$OUT/check_pairs.txt"), not ok:"
grep -vE "^ok " "$OUT/check_pairs.txt" | grep -iE "fail|not ok|error" | head -8
anchor_ab ab 200 6,8,16,20 "new!measured-ceilings new!measured-ceilings!sliced-pairs" 3
if echo "$gpu" | grep -q H200; then FLAGS=--sliced-pairs bars 150 20; fi
budget_done
