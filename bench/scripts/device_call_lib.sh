#!/bin/bash
# Sourced by the device-call scripts (stage_ab.sh, decode_probe/run.sh); they run from the
# repository root (the device runs commands there), where .devbin is.
#   call_setup NAME: a fresh results folder $res=/tmp/NAME, $OUT (default ./NAME_out), a JIT cache
#     of the call's own (MOETUNE_CACHE_DIR) and $res/env.txt (date, the .devbin build, the GPU);
#   step NAME SECONDS command...: runs the command under a timeout, its output in $res/NAME.txt,
#     its exit status and duration appended to $res/summary.txt and printed.
call_setup() {
  : "${1:?call_setup needs a call name}"
  res=/tmp/$1; rm -rf "$res"; mkdir -p "$res" "${OUT:=$PWD/${1}_out}"
  export OUT MOETUNE_CACHE_DIR=/tmp/moetune_${1}_cache
  { date -u; cat .devbin/commit.txt; nvidia-smi -L; } >"$res/env.txt"
}
step() {
  local name=$1 secs=$2; shift 2
  local t0; t0=$(date +%s)
  timeout -k 5 "$secs" "$@" >"$res/$name.txt" 2>&1
  echo "$name: exit $? in $(( $(date +%s) - t0 )) s" | tee -a "$res/summary.txt"
}

# For a call script with a budget (issue5_call40..44.sh), after `set -u`:
#   budget_call DEFAULT_S: CALL_S (default DEFAULT_S) seconds in all; $OUT becomes $FINAL/w (the
#     work folder, tarred by budget_done), one JIT cache, and the GPU and .devbin build printed;
#     $gpu holds the GPU's name;
#   left: the seconds left, less a 15 s margin for the tar (at least 5); cap S: left, at most S;
#   budget_done: $FINAL/call.tgz of the work folder (one file back from the device).
budget_call() {
  budget_s=${CALL_S:-$1}
  FINAL=$OUT; OUT=$FINAL/w; mkdir -p "$OUT"; export OUT
  export MOETUNE_CACHE_DIR=/tmp/moetune-cache
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
  nvidia-smi --query-gpu=name,uuid,clocks.max.sm --format=csv,noheader
  cat .devbin/commit.txt
}
left() { local l=$((budget_s - 15 - SECONDS)); [ "$l" -lt 5 ] && l=5; echo "$l"; }
cap() { local l; l=$(left); [ "$l" -gt "$1" ] && l=$1; echo "$l"; }
budget_done() { tar czf "$FINAL/call.tgz" -C "$FINAL" w && rm -rf "$FINAL/w"; }
#   anchor_ab NAME CAP BATCH SIDES [RUNS]: stage_ab.sh's layer A/B of SIDES at BATCH on both fp8
#     anchors (Qwen3.5 TP4, DeepSeek-V3 TP8), RUNS interleaved runs (default 2), no tests or
#     check, in $OUT/NAME within cap CAP seconds; prints its exit and timings;
#   bars CAP CHECK_S: issue 5's bars at the defaults (final_bars.sh at M = 1..256, then check for
#     CHECK_S seconds) in $OUT/bars within cap CAP seconds; prints the bar rows.
# The sliced kernel's ring depths 3, 4 (the default) and 5, as anchor_ab's SIDES.
ring_sides="new!measured-ceilings!sliced-stages=3 new!measured-ceilings"
ring_sides+=" new!measured-ceilings!sliced-stages=5"
anchor_ab() {
  mkdir -p "$OUT/$1"
  OUT=$OUT/$1 TESTS=none CHECK_BATCH=none RUNS=${5:-2} BENCH_BATCH=$3 SIDES=$4 \
    BENCH_MODELS="--model qwen3.5-122b-a10b-fp8 --tp 4;--model deepseek-v3 --tp 8" \
    timeout -k 5 "$(cap "$2")" bash bench/scripts/stage_ab.sh >"$OUT/$1_console.txt" 2>&1
  echo "$1 A/B: exit $?"; grep -vE "exit 0 in" "$OUT/$1_console.txt" | grep -E "^(===|[0-9])"
}
bars() {
  mkdir -p "$OUT/bars"
  OUT=$OUT/bars BENCH_BATCH=1,8,16,32,64,128,256 CHECK_S=$2 \
    timeout -k 5 "$(cap "$1")" bash bench/scripts/final_bars.sh >"$OUT/bars_console.txt" 2>&1
  echo "final_bars: exit $?"
  grep -E "^ +(1|8|16|32|64|128|256) |rc=" "$OUT/bars_console.txt"
}
