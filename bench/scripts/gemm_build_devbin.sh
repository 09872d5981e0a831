#!/bin/bash
# Builds the grouped-GEMM GPU test binaries for a device machine (which has no -dev packages):
# static libstdc++/libgcc, GoogleTest linked in, libcuda/libnvrtc dlopen()ed at run time.
# Output: .devbin/test_gemm_mma, .devbin/test_gemm_speed (git-ignored; pass carry=[".devbin"]).
# Usage: bench/scripts/gemm_build_devbin.sh [BUILD_DIR]   (default build-gemm; configured if needed)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-gemm}
[ -f "$build/build.ninja" ] || cmake -S "$root" -B "$build" -G Ninja >/dev/null
cmake --build "$build" --target moetune_gemm -j2
mkdir -p "$root/.devbin"
libs="$build/src/gemm/libmoetune_gemm.a $build/src/cuda/libmoetune_cuda.a"
libs="$libs $build/src/config/libmoetune_config.a $build/src/model/libmoetune_model.a"
libs="$libs $build/src/perf/libmoetune_perf.a"  # config_name (config), roofline (perf)
for t in test_gemm_mma test_gemm_speed; do
  g++ -std=c++20 -O2 -DFMT_HEADER_ONLY -I"$root/src" -I"$root/include" -I"$root" \
      -I/usr/local/cuda/include "$root/tests/gpu/$t.cpp" $libs \
      -lgtest_main -lgtest -lpthread -ldl -static-libstdc++ -static-libgcc -o "$root/.devbin/$t"
done
ls -la "$root/.devbin"
