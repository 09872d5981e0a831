#!/bin/bash
# One device call (about 2 minutes) for "no counter memset before a split-K GEMM in the layer"
# (the alignment zeroes this call's split-K counters, FusedMoe sets workspace_counters_zeroed, and
# the split-K GEMM stays a PDL launch). Carry .devbin with two builds:
#   .devbin/main/moetune                          main (before)
#   .devbin/skpdl/{moetune,gpu_test_moe_pdl}      this branch (bench/scripts/pdl_build_devbin.sh)
# Steps: gpu_test_moe_pdl (bit-identical outputs with and without PDL, split-K cases included),
# moetune check at decode sizes (split-K GEMM1 at M = 1), then bench A/B at M = 1, 8, 64 for the
# default model (fp8, GEMM1 split-K 8 at M = 1) and Qwen bf16, main and branch interleaved.
set -uo pipefail
out=${OUT:-$PWD/skpdl_out}
mkdir -p "$out"
export MOETUNE_CACHE_DIR=/tmp/moetune_skpdl_cache
{ date -u; cat .devbin/skpdl/commit.txt .devbin/main/commit.txt 2>/dev/null; nvidia-smi -L; } | tee "$out/env.txt"
step() {  # step NAME SECONDS command...
  local name=$1 secs=$2; shift 2
  local t0=$(date +%s)
  timeout -k 5 "$secs" "$@" >"$out/$name.txt" 2>&1
  echo "$name: exit $? in $(( $(date +%s) - t0 )) s" | tee -a "$out/summary.txt"
}
step test_pdl 90 .devbin/skpdl/gpu_test_moe_pdl --gtest_color=no
step check 90 .devbin/skpdl/moetune check --batch 1,3,8,64 --configs 2 --layer-only
for model in "--model qwen3.5-122b-a10b-fp8 --tp 4" "--model qwen3.5-122b-a10b --tp 4"; do
  for run in 1 2; do  # interleaved; each run keeps its own file
    for side in main skpdl; do
      # shellcheck disable=SC2086
      step "bench_${side}_$(echo $model | tr -c 'a-z0-9' _)_$run" 30 ".devbin/$side/moetune" bench $model --batch 1,8,64
    done
  done
done
grep -E "^(ok|FAIL|timing)|\[  (FAILED|PASSED) " "$out/test_pdl.txt"
grep -vE "^ok " "$out/check.txt" | tail -n 5
for f in "$out"/bench_*.txt; do echo "=== $(basename "$f")"; tail -n 4 "$f"; done
cat "$out/summary.txt"
