#!/bin/bash
# On a device machine (repository root, .devbin from pdl_build_devbin.sh): Nsight Compute counters
# of the decode kernels (kernels/moe_decode.cuh) in `moetune bench`, to see what limits them.
# Clocks are left alone (--clock-control none). Env: NCU_MODEL (default the fp8 default model),
# NCU_BATCH (default 1), NCU_KERNEL (a kernel-name regex, default moe_decode; e.g. moe_gemm for
# the stage path's GEMMs), NCU_COUNT (kernels profiled, default 2). Writes $OUT/decode.ncu-rep
# and $OUT/details.txt; prints the lines that say
# what limits each kernel.
set -uo pipefail
out=${OUT:-$PWD/ncu_out}; mkdir -p "$out"
export MOETUNE_CACHE_DIR=${MOETUNE_CACHE_DIR:-/tmp/moetune-cache}
model=${NCU_MODEL:---model qwen3.5-122b-a10b-fp8 --tp 4}
# shellcheck disable=SC2086
.devbin/moetune bench $model --batch "${NCU_BATCH:-1}" >"$out/bench.txt" 2>&1  # fills the JIT cache
# shellcheck disable=SC2086
timeout 240 ncu --clock-control none --set full -k "regex:${NCU_KERNEL:-moe_decode}" --launch-skip 4 \
  --launch-count "${NCU_COUNT:-2}" \
  -f -o "$out/decode" .devbin/moetune bench $model --batch "${NCU_BATCH:-1}" >"$out/ncu.log" 2>&1
echo "ncu exit $?"; tail -n 3 "$out/ncu.log"
ncu --import "$out/decode.ncu-rep" --page details --print-units base --print-details all >"$out/details.txt" 2>&1
grep -E "${NCU_KERNEL:-moe_decode}|Duration|DRAM Throughput|Memory Throughput|Compute \(SM\)|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Stall|Warp Cycles Per Issued|Issue Slots Busy|Issued Ipc|Bank Conflicts|L2 Hit|Executed Ipc|One or More|No Eligible" \
  "$out/details.txt" | cut -c1-150 | head -120
