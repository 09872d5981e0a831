#!/bin/bash
# Puts the binaries bench/scripts/pdl_verify.sh runs into .devbin (git-ignored; pass
# carry=[".devbin"] to the device call): moetune and gpu_test_moe_pdl from a build configured
# with -DMOETUNE_GPU_TESTS=ON (static libstdc++/libgcc and GoogleTest; libcuda/libnvrtc are
# dlopen()ed at run time), and the commit they were built from.
# Usage: bench/scripts/pdl_build_devbin.sh [BUILD_DIR]   (default build-pdl; configured if needed)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-pdl}
[ -f "$build/build.ninja" ] ||
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMOETUNE_GPU_TESTS=ON >/dev/null
cmake --build "$build" --target moetune gpu_test_moe_pdl gpu_test_moe_stages gpu_test_moe_decode \
  gpu_test_moe_topk_sum gpu_test_moe_align_in_gemm1 gpu_test_moe_sliced gpu_test_moe_persistent -j2
mkdir -p "$root/.devbin"
cp "$build/src/cli/moetune" "$build/tests/gpu/gpu_test_moe_pdl" "$build/tests/gpu/gpu_test_moe_stages" "$build/tests/gpu/gpu_test_moe_decode" "$build/tests/gpu/gpu_test_moe_topk_sum" \
  "$build/tests/gpu/gpu_test_moe_align_in_gemm1" "$build/tests/gpu/gpu_test_moe_sliced" \
  "$build/tests/gpu/gpu_test_moe_persistent" "$root/.devbin/"
git -C "$root" log -1 --format='%H %s' >"$root/.devbin/commit.txt"
git -C "$root" diff --quiet HEAD -- src include kernels tests || echo "(plus uncommitted changes)" >>"$root/.devbin/commit.txt"
"$root/bench/scripts/check_ldd.sh" "$root/.devbin/moetune" "$root/.devbin/gpu_test_moe_pdl"
ls -la "$root/.devbin"
