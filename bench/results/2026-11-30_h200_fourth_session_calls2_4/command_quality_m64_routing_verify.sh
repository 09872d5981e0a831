#!/bin/bash
# One nvidia-h200-x2 call (carry .devbin from pdl_build_devbin.sh; timeout about 500 s):
#   GPU 0: issue 4's quality bar at M = 64 from scratch (tune_quality.sh: the normal sweep, then
#          --exhaustive), with 24 compile threads so that the exhaustive run's ~4,500 kernels
#          compile within the call (deadline QDL, default 440 s; a stop leaves it "partial");
#   GPU 1: gpu_test_moe_pdl (NaN and -inf router rows route to real experts; PDL bit-identity)
#          and `check` of the layer at decode sizes (the routing kernel changed).
# Everything lands in $OUT/call.tgz; a summary prints last.
set -u
R=/tmp/res_q64; mkdir -p "$R/q" "$R/gpu1"
{ date -u; head -c 120 .devbin/commit.txt; echo; nvidia-smi -L; } > "$R/env.txt"
( export CUDA_VISIBLE_DEVICES=1 MOETUNE_COMPILE_THREADS=4 MOETUNE_CACHE_DIR=/tmp/moetune_g1_cache
  timeout 120 .devbin/gpu_test_moe_pdl > "$R/gpu1/test_pdl.txt" 2>&1
  echo "test_pdl rc $?" >> "$R/gpu1/test_pdl.txt"
  timeout 200 .devbin/moetune check --batch 1,3,8,64,257 --variants bf16,fp8_block --configs 1 \
    --layer-only > "$R/gpu1/check.txt" 2>&1
  echo "check rc $?" >> "$R/gpu1/check.txt" ) &
gpu1=$!
CUDA_VISIBLE_DEVICES=0 MOETUNE_COMPILE_THREADS=24 OUT=$R/q QUALITY_WORK=/tmp/qwork_64 \
  QUALITY_BATCH=64 QUALITY_DEADLINE_S=${QDL:-440} MOETUNE_CACHE_DIR=/tmp/moetune_q64_cache \
  bash bench/scripts/tune_quality.sh > "$R/q/driver.log" 2>&1
echo "quality rc $?" >> "$R/q/driver.log"
wait "$gpu1"
tar -czf "$OUT/call.tgz" -C "$R" .
echo "=== GPU 1"; grep -E "^(ok|FAIL) |PASSED|FAILED|rc " "$R/gpu1/test_pdl.txt" | tail -n 12
grep -vE "^ok " "$R/gpu1/check.txt" | tail -n 4
echo "=== quality (GPU 0)"; tail -n 8 "$R/q/driver.log"
