#!/bin/bash
# On a device machine (repository root, .devbin from bench/scripts/gemm_build_devbin.sh): Nsight
# Compute counters of a few grouped-GEMM instances, to see what limits the fp8 GEMMs at large M
# (bench/results/2026-11-30_h200_gemm_ws.md: GEMM1's time hardly moves with tile or stage count).
# Clocks are left alone (--clock-control none, METHOD.md). Writes $OUT/gemm_<i>.ncu-rep and prints
# the per-kernel summary (speed of light, memory, warp stalls, occupancy).
# Env: NCU_CONFIGS (default: the Qwen fp8 M=4096 defaults and the warp-specialized 128x128 w8),
#      NCU_M (default 4096), NCU_SHAPES (default qwen3.5-tp4-fp8b), GEMM_SPEED_BIN,
#      NCU_IMPORT (a .ncu-rep already taken, e.g. bench/results/2026-11-30_h200_ncu/gemm.ncu-rep:
#      print it, profile nothing; the CPU machine has no ncu to read one).
# Each report's whole details page goes to $OUT/gemm_<i>.txt; the summary printed last keeps the lines that
# say what limits the kernel (throughputs, occupancy, warp stall reasons).
set -uo pipefail
bin=${GEMM_SPEED_BIN:-.devbin/test_gemm_speed}  # which build's test_gemm_speed to profile
out=${OUT:-$PWD/ncu_out}
mkdir -p "$out"
summary() {  # summary REPORT
  ncu --import "$1" --page details --print-units base --print-details all >"$out/details.txt" 2>&1
  grep -E "moe_gemm|Duration|Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Stall|Warp Cycles Per|Issue Slot|Issued Ipc|Block Size|Dynamic Shared|Waves Per SM|Bank Conflicts|L2 Hit|L1/TEX Hit" \
    "$out/details.txt" | head -200
}
if [ -n "${NCU_IMPORT:-}" ]; then
  summary "$NCU_IMPORT"
  exit
fi
export MOETUNE_CACHE_DIR=${MOETUNE_CACHE_DIR:-/tmp/moetune-cache}
export MOETUNE_GEMM_BENCH_OUT=/tmp/ncu_bench MOETUNE_GEMM_BENCH_M=${NCU_M:-4096}
export MOETUNE_GEMM_BENCH_SHAPES=${NCU_SHAPES:-qwen3.5-tp4-fp8b}
export MOETUNE_GEMM_BENCH_CONFIGS=${NCU_CONFIGS:-m64n64k128_g8_w4_s4_sk1,m64n128k128_g8_w4_s4_sk1,m128n128k128_g8_w8_s4_sk1}
mkdir -p /tmp/ncu_bench
# Compile and time once without the profiler (fills the JIT cache; the timings land in $out).
"$bin" --gtest_filter='GemmSpeed.*' >"$out/speed.log" 2>&1
cp /tmp/ncu_bench/gemm_speed.jsonl "$out/" 2>/dev/null
# One profiled process per config and GEMM (a single run would give --launch-count to the first
# config's launches only): the kernel is matched on its demangled name, whose first template
# argument is the stage (0 up, 1 down; NVRTC's names spell it "(int)0"); --launch-skip passes the
# eager probe's launch.
i=0
for cfg in ${MOETUNE_GEMM_BENCH_CONFIGS//,/ }; do
  for stage in 0 1; do
    MOETUNE_GEMM_BENCH_CONFIGS=$cfg ncu --clock-control none --kernel-name-base demangled \
      -k "regex:moe_gemm\\w*<(\\(int\\))?${stage}," --launch-skip 1 --launch-count 1 \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
      --section SchedulerStats --section Occupancy --section LaunchStats \
      --section SourceCounters --section MemoryWorkloadAnalysis_Tables \
      -f -o "$out/gemm_$i" "$bin" --gtest_filter='GemmSpeed.*' >>"$out/ncu.log" 2>&1
    echo "ncu $cfg stage $stage: exit $?"
    i=$((i + 1))
  done
done
for r in "$out"/gemm_*.ncu-rep; do summary "$r"; cp "$out/details.txt" "${r%.ncu-rep}.txt"; done
