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
