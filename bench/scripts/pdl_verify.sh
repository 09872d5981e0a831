#!/bin/bash
# One device call (about 3 minutes at most) that verifies programmatic dependent launch between
# the layer's stage kernels. Carry .devbin from bench/scripts/pdl_build_devbin.sh. Steps, each
# with its own time cap:
#   test_pdl    gpu_test_moe_pdl: outputs bit-identical with and without PDL (eager and CUDA
#               graph, bf16/fp16/fp8 block/fp8 tensor, M = 1, 8, 64, 257, split-K) + a timing print
#   check       moetune check at decode sizes (PDL on, the default on sm_90+) against fp64
#   bench_*     moetune bench --batch 1,8,64, default model (fp8) and bf16, with and without PDL
# Logs under $OUT (default ./pdl_out); a summary last.
set -uo pipefail
bin=.devbin
out=${OUT:-$PWD/pdl_out}
mkdir -p "$out"
export MOETUNE_CACHE_DIR=/tmp/moetune_pdl_cache
{ date -u; cat "$bin/commit.txt"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; } | tee "$out/env.txt"
step() {  # step NAME SECONDS command...
  local name=$1 secs=$2; shift 2
  local t0=$(date +%s)
  timeout -k 5 "$secs" "$@" >"$out/$name.txt" 2>&1
  local rc=$?
  echo "$name: exit $rc in $(( $(date +%s) - t0 )) s" | tee -a "$out/summary.txt"
}
step test_pdl 60 "$bin/gpu_test_moe_pdl" --gtest_color=no
step check 35 "$bin/moetune" check --batch 1,8,64 --configs 1 --layer-only
step bench_fp8_pdl 20 "$bin/moetune" bench --batch 1,8,64
step bench_fp8_nopdl 20 "$bin/moetune" bench --batch 1,8,64 --no-pdl
step bench_bf16_pdl 15 "$bin/moetune" bench --model qwen3.5-122b-a10b --tp 4 --batch 1,8,64
step bench_bf16_nopdl 15 "$bin/moetune" bench --model qwen3.5-122b-a10b --tp 4 --batch 1,8,64 --no-pdl
grep -E '^(ok|FAIL|timing|driver|\[  (FAILED|PASSED|SKIPPED) )' "$out/test_pdl.txt"
grep -vE '^ok ' "$out/check.txt" | tail -n 8
for f in bench_fp8_pdl bench_fp8_nopdl bench_bf16_pdl bench_bf16_nopdl; do
  echo "=== $f"; tail -n 5 "$out/$f.txt"
done
cat "$out/summary.txt"
