#!/bin/bash
# On a device machine (from the repository root, with .devbin carried): the grouped-GEMM
# correctness test against the fp64 reference, then the GEMM-phase cold timing sweep (GEMM1 +
# GEMM2, CUDA graph of 16 calls over 16 routing sets, 15 replays, median) over the anchor shapes
# at M in {1, 8, 64, 256, 1024, 4096}. Logs and results go to $OUT (or ./gemm_out).
# Build first, here: bench/scripts/gemm_build_devbin.sh
# Env: GEMM_SKIP_CHECK=1 skips the correctness test; MOETUNE_GEMM_BENCH_M=1,8 limits the sizes;
#      MOETUNE_GEMM_BENCH_SHAPES=fp8b keeps the anchor shapes whose name contains it;
#      GEMM_CHECK_FILTER is a GoogleTest filter for the correctness test.
set -uo pipefail
out=${OUT:-$PWD/gemm_out}
mkdir -p "$out"
export MOETUNE_CACHE_DIR=${MOETUNE_CACHE_DIR:-/tmp/moetune-cache}
{
  date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
  git log -1 --format='commit %H %s' 2>/dev/null || true
} 2>&1 | tee "$out/gemm_env.txt"
rc=0
if [ "${GEMM_SKIP_CHECK:-0}" != 1 ]; then
  .devbin/test_gemm_mma --gtest_filter="${GEMM_CHECK_FILTER:-*}" 2>&1 | tee "$out/gemm_check.log" \
    | grep -E "^\[( +OK|  FAILED|  PASSED|==========)|FAIL|NONDET|skip" | head -60
  rc=${PIPESTATUS[0]}
fi
MOETUNE_GEMM_BENCH_OUT="$out" .devbin/test_gemm_speed 2>&1 > "$out/gemm_speed.log"
rc2=$?
grep -E "^\[phase\]" "$out/gemm_speed.log"
tail -3 "$out/gemm_speed.log"
echo "check rc=$rc speed rc=$rc2"
