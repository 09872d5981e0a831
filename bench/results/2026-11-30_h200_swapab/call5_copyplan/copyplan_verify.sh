#!/bin/bash
# On a device machine (repository root; .devbin from pdl_build_devbin.sh and gemm_build_devbin.sh
# at the change, .devbin/prev/moetune the build before it): the wgmma kernel's two-register copy
# plan and swap-AB's occupancy bound. test_gemm_mma (every shape, dtype and config against the
# fp64 reference), then layer_ab_verify.sh (NEW's check; bench of BASE=prev and NEW interleaved
# twice on the three anchors). Output in $OUT.
set -uo pipefail
out=${OUT:-$PWD/copyplan_out}
mkdir -p "$out"
export MOETUNE_CACHE_DIR=${MOETUNE_CACHE_DIR:-/tmp/moetune-cache}
timeout 200 .devbin/test_gemm_mma >"$out/gemm_check.log" 2>&1
echo "test_gemm_mma rc=$? ($(grep -c '^\[case\]' "$out/gemm_check.log") cases)"
grep -E "^\[  FAILED|NONDET" "$out/gemm_check.log" | head
OUT="$out" BASE=prev NEW=. BENCH_BATCH=${AB_BATCH:-8,64,256,1024} CHECK_BATCH=1,8,64,257 \
  bash bench/scripts/layer_ab_verify.sh 2>&1 | tail -60
