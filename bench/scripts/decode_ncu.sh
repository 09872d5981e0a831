#!/bin/bash
# On a device machine (repository root; .devbin from pdl_build_devbin.sh and gemm_build_devbin.sh):
# where block-fp8 decode time goes after swap-AB. `moetune profile` (per-stage times against each
# stage's floor) of Qwen3.5 TP4 and DeepSeek-V3 TP8 fp8 at M = 8 and 64, then Nsight Compute of
# Qwen's GEMM1 and GEMM2 at M = 64: swap-AB s2 (GEMM2's default), s3, and the former unswapped
# GEMM2 default m16n64k64 s5 (clocks left alone). Raw output in $OUT.
set -uo pipefail
out=${OUT:-$PWD/decode_ncu_out}
mkdir -p "$out"
export MOETUNE_CACHE_DIR=${MOETUNE_CACHE_DIR:-/tmp/moetune-cache}
{ date -u; nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.max.sm --format=csv;
  cat .devbin/commit.txt; } >"$out/env.txt" 2>&1
timeout 60 .devbin/moetune profile --batch 8,64 >"$out/profile_qwen.txt" 2>&1
timeout 60 .devbin/moetune profile --model deepseek-v3 --tp 8 --batch 8,64 \
  >"$out/profile_dsv3.txt" 2>&1
cat "$out/profile_qwen.txt" "$out/profile_dsv3.txt"
OUT="$out/ncu" NCU_M=64 NCU_SHAPES=qwen3.5-tp4-fp8b GEMM_SPEED_BIN=.devbin/test_gemm_speed \
  NCU_CONFIGS=m16n128k128_g1_w4_s2_sk1_ab1,m16n128k128_g1_w4_s3_sk1_ab1,m16n64k64_g1_w4_s5_sk1 \
  timeout 400 bash bench/scripts/gemm_ncu.sh >"$out/ncu_summary.txt" 2>&1
echo "ncu rc=$?"
grep -E "^ncu |moe_gemm|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit (Shared|Registers)|Stall (Long|Barrier|Wait|Short)|Warp Cycles Per Issued" \
  "$out/ncu_summary.txt" | cut -c1-150 | head -120
