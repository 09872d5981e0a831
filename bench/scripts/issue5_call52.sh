#!/bin/bash
# Issue 5, forty-fifth session's last call: on an H200, the bars at main's defaults (the early
# w13 copies are the default since the last H200 bars; prediction: M = 16 past 85%, M = 8 at
# 84..85%); on another GPU, gpu_test_moe_sliced at the defaults (its new assertion: the
# counters left zero after layer calls and GEMM phases). Then, time allowing, the trace with the
# SMs (%smid): the correlation of the SMs' last exits between runs says whether the slow blocks
# are slow for where they run (prediction: > 0.5 if the GPC placement sets the rate, near 0 if
# not). Carry .devbin (pdl_build_devbin.sh). Env: CALL_S (default 240; 330 on an H200).
set -u
. "$(dirname "${BASH_SOURCE[0]}")/device_call_lib.sh" || exit 1
budget_call 240
if echo "$gpu" | grep -q H200; then
  budget_s=${CALL_S:-330}
  bars 220 20
else
  timeout -k 5 "$(cap 120)" .devbin/gpu_test_moe_sliced --gtest_color=no \
    --gtest_filter='-*Trace*' >"$OUT/gpu_test.txt" 2>&1
  echo "gpu_test_moe_sliced: exit $?"
  grep -E "^\[  (FAILED|PASSED) |Failure" "$OUT/gpu_test.txt" | head -8
fi
MOETUNE_SLICED_TRACE=1 timeout -k 5 "$(cap 60)" .devbin/gpu_test_moe_sliced --gtest_color=no \
  --gtest_filter='*Trace*' >"$OUT/trace.txt" 2>&1
echo "trace: exit $?"; grep -E "^trace .*(run 0|correlation)" "$OUT/trace.txt" | grep -v pairs
budget_done
