#!/bin/bash
# Issue 5's third call of the forty-first session. Carry .devbin: `moetune` and
# gpu_test_moe_sliced built at main with moetune_default_sliced_stages (3 ring slots on the H100
# SXM, 4 elsewhere).
# 1. gpu_test_moe_sliced and `check` on the defaults at M = 6..8, 14, 16, 20, 24 on both fp8
#    anchors (on an H100 SXM: the 3-slot ring's first checks against fp64).
# 2. On an H100: the defaults (3 slots) against --sliced-stages 4 at M = 6, 8, 16, 20, 24, two
#    interleaved runs. Prediction (call 2 of this session, another H100): 3 slots -0.1..-2.1%
#    except Qwen3.5 M = 8 (+0.3%).
#    On an H200: issue 5's bars at the defaults (final_bars.sh; predictions in issue5_call42.sh),
#    then the ring depth, --sliced-stages 3 / default 4 / 5 at M = 8, 16, one run a side.
# Env: CALL_S (the command's seconds, default 330).
set -u
. "$(dirname "${BASH_SOURCE[0]}")/device_call_lib.sh" || exit 1
budget_call 330
timeout "$(cap 90)" .devbin/gpu_test_moe_sliced --gtest_color=no >"$OUT/gpu_test_moe_sliced.txt" 2>&1
echo "gpu_test_moe_sliced rc=$?"; grep -E "^\[  (PASSED|FAILED)|^FAIL" "$OUT/gpu_test_moe_sliced.txt"
for m in "qwen3.5-122b-a10b-fp8 --tp 4" "deepseek-v3 --tp 8"; do
  # shellcheck disable=SC2086
  timeout "$(cap 60)" .devbin/moetune check --model $m --batch 6,7,8,14,16,20,24 --configs 1 \
    >"$OUT/check_${m%% *}.txt" 2>&1
  echo "check $m rc=$?: $(tail -n 1 "$OUT/check_${m%% *}.txt")"
done
if echo "$gpu" | grep -q H200; then
  bars 200 20
  sides="$ring_sides"
  runs=1 batch=8,16
else
  sides="new!measured-ceilings new!measured-ceilings!sliced-stages=4"
  runs=2 batch=6,8,16,20,24
fi
anchor_ab ring 120 "$batch" "$sides" "$runs"
budget_done
