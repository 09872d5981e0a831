#!/bin/bash
# Issue 5's call of the forty-first session. Carry .devbin: `moetune` and gpu_test_moe_sliced
# built (pdl_build_devbin.sh) at 56f3d80, the sliced kernel routing the tokens itself (ROUTE:
# each block picks the experts from the router logits before its PDL wait, so its first ring
# units' weights stream while the routing launch runs; `--no-sliced-route` is the previous
# behaviour). Main reverts it (96ffd84) after this call measured it a loss
# (bench/results/2026-12-07_fortyfirst_session.md); the change is
# bench/results/2026-12-07_fortyfirst_session/sliced_route.diff, to `git apply` on 2137ce0.
# 1. gpu_test_moe_sliced (the kernel against the stage path; the default now routes, and its
#    precomputed-ids case reads topk_ids: the two within run-to-run) and `check` on the defaults
#    at M = 6..8, 14, 16, 20 on both fp8 anchors.
# 2. Layer A/B, defaults against --no-sliced-route at M = 6, 8, 16, 20 on both fp8 anchors, two
#    interleaved runs. Prediction: -0.8..-1.5 µs wherever the sliced kernel runs (H100: M = 6..8,
#    14..24; H200: 6..8, 14..20): about -2..-3% at Qwen3.5 M = 8, -1..-2% at M = 16 / 20 and on
#    DeepSeek-V3 M = 8.
# 3. On an H200: issue 5's bars (final_bars.sh) at the defaults. On an H100: the ring depth
#    (--sliced-stages 3 / 4 / 5) at M = 8, 16, one run a side.
# Env: CALL_S (the command's seconds, default 450).
set -u
. "$(dirname "${BASH_SOURCE[0]}")/device_call_lib.sh" || exit 1
budget_call 450
timeout "$(cap 90)" .devbin/gpu_test_moe_sliced --gtest_color=no >"$OUT/gpu_test_moe_sliced.txt" 2>&1
echo "gpu_test_moe_sliced rc=$?"; grep -E "^(ok|FAIL) |^\[  (PASSED|FAILED)" "$OUT/gpu_test_moe_sliced.txt"
for m in "qwen3.5-122b-a10b-fp8 --tp 4" "deepseek-v3 --tp 8"; do
  # shellcheck disable=SC2086
  timeout "$(cap 60)" .devbin/moetune check --model $m --batch 6,7,8,14,16,20 --configs 1 \
    >"$OUT/check_${m%% *}.txt" 2>&1
  echo "check $m rc=$?: ok $(grep -c '^ok' "$OUT/check_${m%% *}.txt"); $(tail -n 1 "$OUT/check_${m%% *}.txt")"
done
anchor_ab ab 150 6,8,16,20 "new!measured-ceilings new!measured-ceilings!no-sliced-route"
if echo "$gpu" | grep -q H200; then
  bars 220 30
else
  anchor_ab ring 100 8,16 "$ring_sides" 1
fi
budget_done
