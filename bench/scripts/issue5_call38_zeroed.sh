#!/bin/bash
# The routing-zeroes-out change's first GPU call (planned in the thirty-eighth session; no device
# came in the thirty-eighth or thirty-ninth). Whichever GPU comes. Carry .devbin, built here:
#   bench/scripts/pdl_build_devbin.sh && mkdir -p .devbin/prev &&
#     cp .devbin/moetune .devbin/commit.txt .devbin/prev/      # main: the A/B's `prev` side
#   d=bench/results/2026-12-07_thirtyninth_session; git worktree add /tmp/zeroed HEAD &&
#     git -C /tmp/zeroed apply "$PWD/$d/routing_zeroes_out.diff" &&
#     /tmp/zeroed/bench/scripts/pdl_build_devbin.sh /tmp/zeroed-build &&
#     cp /tmp/zeroed/.devbin/{moetune,gpu_test_moe_sliced,gpu_test_moe_stages} .devbin/ &&
#     echo "$(git log -1 --format=%H) + $d/routing_zeroes_out.diff" >.devbin/commit.txt
#   (the `new` side; about 18 MB to carry).
# The change: where the sliced kernel runs after the routing launch (the default at M = 6..8 on
# the fp8 anchors), the routing's blocks zero out and the kernel takes no ticket on entry and
# counts nothing on exit: an atomic round trip less at each end of its critical path.
# Prediction: layer -1..-2 µs at M = 6..8 (Qwen3.5 fp8 -2..-4%, DeepSeek-V3 -1..-2%); M = 16
# (stage path) within the spread. On an H200, the bars after it at the new build (Qwen3.5 fp8
# M = 8 about 38.4 µs, 83% of floor_measured, if the H100's gain carries over).
# 1. gpu_test_moe_sliced (out is poisoned before every call: the routing must zero it) and
#    gpu_test_moe_stages (the routing kernel's new arguments); check at M = 6..8.
# 2. layer A/B prev / new at M = 6, 7, 8, 16 on both fp8 anchors, three interleaved runs; at
#    M = 16 also --sliced prev / new against the default (stage path), two runs, if time is
#    left after 3.
# 3. on an H200: issue 5's bars (the new build if 1 passed, else main's) and a profile at M = 8.
# Env: CALL_S (the command's seconds), AB_RUNS (3), AB_BATCH (6,7,8,16) for a shorter call.
set -u
left() { local l=$((${CALL_S:-540} - 15 - SECONDS)); [ "$l" -lt 5 ] && l=5; echo "$l"; }
cap() { local l; l=$(left); [ "$l" -gt "$1" ] && l=$1; echo "$l"; }  # left, at most $1
FINAL=$OUT; OUT=$FINAL/w; mkdir -p "$OUT"; export OUT
export MOETUNE_CACHE_DIR=/tmp/moetune-cache
nvidia-smi --query-gpu=name,uuid,clocks.max.sm --format=csv,noheader
cat .devbin/commit.txt .devbin/prev/commit.txt
ok=1
for t in gpu_test_moe_sliced gpu_test_moe_stages; do
  timeout 120 ".devbin/$t" --gtest_color=no >"$OUT/$t.txt" 2>&1
  rc=$?; [ $rc -ne 0 ] && ok=0
  echo "$t rc=$rc: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/$t.txt" | tr '\n' ' ')"
done
i=0
for model in "--model qwen3.5-122b-a10b-fp8 --tp 4" "--model deepseek-v3 --tp 8"; do
  # shellcheck disable=SC2086
  timeout 60 .devbin/moetune check $model --batch 6,7,8 --configs 1 >"$OUT/check_$i.txt" 2>&1
  rc=$?; [ $rc -ne 0 ] && ok=0
  echo "check $i rc=$rc: $(tail -n 1 "$OUT/check_$i.txt")"
  grep -hvE "^ok " "$OUT/check_$i.txt" | head -n 3
  i=$((i + 1))
done
mkdir -p "$OUT/ab"
OUT=$OUT/ab TESTS=none CHECK_BATCH=none RUNS=${AB_RUNS:-3} BENCH_BATCH=${AB_BATCH:-6,7,8,16} \
  BENCH_MODELS="--model qwen3.5-122b-a10b-fp8 --tp 4;--model deepseek-v3 --tp 8" \
  SIDES="prev!measured-ceilings new!measured-ceilings" \
  timeout -k 5 "$(cap 150)" bash bench/scripts/stage_ab.sh >"$OUT/ab_console.txt" 2>&1
echo "stage_ab: exit $?"; grep -vE "exit 0 in" "$OUT/ab_console.txt" | tail -n 32
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  [ $ok -eq 1 ] || cp .devbin/prev/moetune .devbin/moetune
  echo "bars with $([ $ok -eq 1 ] && echo new || echo prev)"
  mkdir -p "$OUT/bars"
  OUT=$OUT/bars BENCH_BATCH=1,8,16,32,64,128,256 CHECK_S=40 \
    timeout -k 5 "$(cap 200)" bash bench/scripts/final_bars.sh >"$OUT/bars_console.txt" 2>&1
  echo "final_bars: exit $?"
  grep -E "^ +(1|8|16|32|64|128|256) |rc=" "$OUT/bars_console.txt"
  timeout "$(cap 30)" .devbin/moetune profile --model qwen3.5-122b-a10b-fp8 --tp 4 --batch 8 \
    --measured-ceilings >"$OUT/profile_m8.txt" 2>&1
  echo "profile rc=$?"; tail -n 12 "$OUT/profile_m8.txt"
fi
# M = 16 (two waves of sliced blocks): the sliced kernel lost by +0.8% on the H200 (thirty-fifth
# session); with an atomic round trip less at each end it may tie or win there.
[ $ok -eq 1 ] && [ "$(left)" -gt 100 ] && mkdir -p "$OUT/ab16" &&
OUT=$OUT/ab16 TESTS=none CHECK_BATCH=none RUNS=2 BENCH_BATCH=16 \
  BENCH_MODELS="--model qwen3.5-122b-a10b-fp8 --tp 4;--model deepseek-v3 --tp 8" \
  SIDES="new!measured-ceilings prev!sliced!measured-ceilings new!sliced!measured-ceilings" \
  timeout -k 5 "$(cap 90)" bash bench/scripts/stage_ab.sh >"$OUT/ab16_console.txt" 2>&1 &&
echo "stage_ab M=16: done"; grep -svE "exit 0 in" "$OUT/ab16_console.txt" | tail -n 14
tar czf "$FINAL/call.tgz" -C "$FINAL" w && rm -rf "$FINAL/w"
