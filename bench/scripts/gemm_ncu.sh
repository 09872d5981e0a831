#!/bin/bash
# On a device machine (repository root, .devbin from bench/scripts/gemm_build_devbin.sh): Nsight
# Compute counters of a few grouped-GEMM instances, to see what limits the fp8 GEMMs at large M
# (bench/results/2026-11-30_h200_gemm_ws.md: GEMM1's time hardly moves with tile or stage count).
# Clocks are left alone (--clock-control none, METHOD.md). Writes $OUT/gemm.ncu-rep and prints
# the per-kernel summary (speed of light, memory, warp stalls, occupancy).
# Env: NCU_CONFIGS (default: the Qwen fp8 M=4096 defaults and the warp-specialized 128x128 w8),
#      NCU_M (default 4096), NCU_SHAPES (default qwen3.5-tp4-fp8b), NCU_COUNT (kernels, default 6).
set -uo pipefail
out=${OUT:-$PWD/ncu_out}
mkdir -p "$out"
export MOETUNE_CACHE_DIR=${MOETUNE_CACHE_DIR:-/tmp/moetune-cache}
export MOETUNE_GEMM_BENCH_OUT=/tmp/ncu_bench MOETUNE_GEMM_BENCH_M=${NCU_M:-4096}
export MOETUNE_GEMM_BENCH_SHAPES=${NCU_SHAPES:-qwen3.5-tp4-fp8b}
export MOETUNE_GEMM_BENCH_CONFIGS=${NCU_CONFIGS:-m64n64k128_g8_w4_s4_sk1,m64n128k128_g8_w4_s4_sk1,m128n128k128_g8_w8_s4_sk1}
mkdir -p /tmp/ncu_bench
# Compile and time once without the profiler (fills the JIT cache; the timings land in $out).
.devbin/test_gemm_speed --gtest_filter='GemmSpeed.*' >"$out/speed.log" 2>&1
cp /tmp/ncu_bench/gemm_speed.jsonl "$out/" 2>/dev/null
ncu --clock-control none -k regex:moe_gemm --launch-count "${NCU_COUNT:-6}" \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
  --section SchedulerStats --section Occupancy --section LaunchStats \
  -f -o "$out/gemm" .devbin/test_gemm_speed --gtest_filter='GemmSpeed.*' >"$out/ncu.log" 2>&1
echo "ncu exit $?"
ncu --import "$out/gemm.ncu-rep" --page details --print-units base 2>&1 |
  grep -E "moe_gemm|Duration|Throughput|Memory Throughput|DRAM Throughput|L2 Cache Throughput|Registers Per|Achieved Occupancy|Stall|Issue Slot|Block Size|Dynamic Shared" |
  head -120
