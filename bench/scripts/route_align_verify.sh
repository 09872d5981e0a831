#!/bin/bash
# One device call (about 3 minutes) for routing + alignment in one launch at decode sizes
# (kernels/moe_route_align.cuh; routing_fuses_align: M <= 8, M*topk <= 512). Carry .devbin with:
#   .devbin/main/moetune                       main (before)
#   .devbin/ra/{moetune,gpu_test_moe_pdl}      this branch (bench/scripts/pdl_build_devbin.sh)
# Steps: gpu_test_moe_pdl (PDL on/off bit-identical; the fused launch at M = 1, 8); moetune check
# on both sides of the threshold (M = 1, 3, 8, 9, 64: routing and alignment each against the
# fp64 reference, the layer too); profile at M = 1, 8 (the routing+align stage's time); bench
# A/B at M = 1, 2, 4, 8, 9 (fp8 default model, DeepSeek-V3 with grouped routing, Qwen bf16).
set -uo pipefail
out=${OUT:-$PWD/ra_out}
mkdir -p "$out"
export MOETUNE_CACHE_DIR=/tmp/moetune_ra_cache
{ date -u; cat .devbin/ra/commit.txt .devbin/main/commit.txt 2>/dev/null; nvidia-smi -L; } | tee "$out/env.txt"
step() {  # step NAME SECONDS command...
  local name=$1 secs=$2; shift 2
  local t0=$(date +%s)
  timeout -k 5 "$secs" "$@" >"$out/$name.txt" 2>&1
  echo "$name: exit $? in $(( $(date +%s) - t0 )) s" | tee -a "$out/summary.txt"
}
step test_pdl 90 .devbin/ra/gpu_test_moe_pdl --gtest_color=no
step check 120 .devbin/ra/moetune check --batch 1,3,8,9,64 --configs 1
step profile 40 .devbin/ra/moetune profile --model deepseek-v3 --tp 8 --batch 1,8
i=0
for model in "--model qwen3.5-122b-a10b-fp8 --tp 4" "--model deepseek-v3 --tp 8" "--model qwen3.5-122b-a10b --tp 4"; do
  for side in main ra main ra; do
    # shellcheck disable=SC2086
    step "bench_${i}_$side" 30 ".devbin/$side/moetune" bench $model --batch 1,2,4,8,9
  done
  i=$((i + 1))
done
grep -E "^(ok|FAIL|timing)|\[  (FAILED|PASSED) " "$out/test_pdl.txt"
grep -vE "^ok " "$out/check.txt" | tail -n 6
tail -n 25 "$out/profile.txt"
for f in "$out"/bench_*.txt; do echo "=== $(basename "$f")"; tail -n 4 "$f"; done
cat "$out/summary.txt"
