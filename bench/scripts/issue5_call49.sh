#!/bin/bash
# RECORD (forty-fourth session): `--sliced-pair-claims` was removed after it hung on its first
# GPU run (call 1 of that session), so the claims steps below now fail at once.
# Issue 5, forty-fourth session: call48's checks and trace with the early w13 copies' A/B in
# place of its stage-path prefetch sweep (kept in call48 for a later call). Carry .devbin
# (`moetune` and `gpu_test_moe_sliced` from pdl_build_devbin.sh at main). In order:
#   1. `check` at main's defaults (the sliced kernel's source changed after the last device
#      check: smem layout, PAIR argument, GEMM1's weight copy as one lambda), both fp8 anchors,
#      M = 1..64; then with MOETUNE_SLICED_EARLY_W13=1 at M = 6..20;
#   2. gpu_test_moe_sliced (plain, pairs, claiming pairs against the stage path), then
#      `check --sliced-pair-claims` at M = 8, 16 (the claims never ran on a GPU);
#   3. the trace (plain / pairs / claims, M = 8, 16);
#   4. the layer A/B at M = 6, 8, 16, 20 on both fp8 anchors: defaults, early w13 copies
#      (EARLY=1), claiming pairs. Predictions: early -0.3..-0.8% (0.1..0.3 µs of the ~38 µs at
#      M = 8: one warp's pass over topk_ids, two barriers, the mbarrier setup and the token rows'
#      copies come off each block's first S weight loads, all S ring lanes shifted), the claims
#      0..+1% on Qwen3.5 (static pairs +0.3..+1.5% on an H100) and -0.5..-1.5% on DeepSeek-V3;
#   5. on an H200, issue 5's bars (with EARLY=1 and a clean check of it: with the early copies).
# Env: CALL_S (the command's seconds, default 480; 590 on an H200); EARLY=1 adds the early w13
# copies (check and A/B side).
set -u
. "$(dirname "${BASH_SOURCE[0]}")/device_call_lib.sh" || exit 1
budget_call 480
EW=MOETUNE_SLICED_EARLY_W13
fp8_models=("--model qwen3.5-122b-a10b-fp8 --tp 4" "--model deepseek-v3 --tp 8")
for m in "${fp8_models[@]}"; do
  # shellcheck disable=SC2086
  timeout -k 5 "$(cap 45)" .devbin/moetune check $m --batch 1,6,8,16,20,64 --configs 1 \
    --layer-only >>"$OUT/check_defaults.txt" 2>&1
  echo "check defaults ($m): exit $?"
  if [ -n "${EARLY:-}" ]; then
    # shellcheck disable=SC2086
    env $EW=1 timeout -k 5 "$(cap 35)" .devbin/moetune check $m --batch 6,8,16,20 --configs 1 \
      --layer-only >>"$OUT/check_early.txt" 2>&1
    echo "check $EW=1 ($m): exit $?"
  fi
done
for f in check_defaults ${EARLY:+check_early}; do
  echo "$f: ok $(grep -c '^ok' "$OUT/$f.txt")"
  grep -vE "^ok " "$OUT/$f.txt" | grep -iE "fail|not ok|error" | head -6
done
timeout -k 5 "$(cap 70)" .devbin/gpu_test_moe_sliced --gtest_color=no >"$OUT/gpu_test.txt" 2>&1
echo "gpu_test_moe_sliced: exit $?"
grep -E "^\[  (FAILED|PASSED) |Failure" "$OUT/gpu_test.txt"
if [ -n "${EARLY:-}" ]; then
  env $EW=1 timeout -k 5 "$(cap 60)" .devbin/gpu_test_moe_sliced --gtest_color=no \
    --gtest_filter='-*Pair*' >"$OUT/gpu_test_early.txt" 2>&1
  echo "gpu_test_moe_sliced $EW=1: exit $?"
  grep -E "^\[  (FAILED|PASSED) |Failure" "$OUT/gpu_test_early.txt"
fi
for m in "${fp8_models[@]}"; do
  # shellcheck disable=SC2086
  timeout -k 5 "$(cap 35)" .devbin/moetune check $m --batch 8,16 --configs 1 --sliced \
    --sliced-pair-claims >>"$OUT/check_claims.txt" 2>&1
  echo "check --sliced-pair-claims ($m): exit $?"
done
echo "check claims: ok $(grep -c '^ok' "$OUT/check_claims.txt")"
grep -vE "^ok " "$OUT/check_claims.txt" | grep -iE "fail|not ok|error" | head -6
MOETUNE_SLICED_TRACE=1 timeout -k 5 "$(cap 90)" .devbin/gpu_test_moe_sliced --gtest_color=no \
  --gtest_filter='*Trace*' >"$OUT/trace.txt" 2>&1
echo "trace: exit $?"; grep -E "^trace |Failure" "$OUT/trace.txt"
sides="new!measured-ceilings${EARLY:+ new!measured-ceilings@$EW=1}"
sides+=" new!measured-ceilings!sliced-pair-claims"
anchor_ab early 170 6,8,16,20 "$sides"
# The bars at the defaults are the forty-second session's (19 of 21); with EARLY=1 and its check
# clean, take them with the early copies.
if echo "$gpu" | grep -q H200; then
  if [ -n "${EARLY:-}" ] && [ "$(grep -c '^ok' "$OUT/check_early.txt")" -gt 0 ] &&
    ! grep -vE "^ok " "$OUT/check_early.txt" | grep -qiE "fail|not ok|error"; then
    echo "bars with $EW=1"; export $EW=1
  fi
  bars 150 20
fi
budget_done
