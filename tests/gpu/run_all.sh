#!/usr/bin/env bash
# Builds and runs every GPU test (tests/gpu/test_*.cpp) on a GPU machine, in one command, and
# prints a short table last.
#   tests/gpu/run_all.sh                 configure + build (-DMOETUNE_GPU_TESTS=ON) into build-gpu, run
#   MOETUNE_GPU_BIN=DIR tests/gpu/run_all.sh   run prebuilt gpu_test_* binaries from DIR instead
#                                        (machines without the -dev packages: build elsewhere with
#                                        static libstdc++, which cmake/Static.cmake does by default)
# Logs go to $MOETUNE_GPU_LOGS (default build-gpu/logs, or $OUT when set). Exit 1 if any fails.
set -uo pipefail
cd "$(dirname "$0")/../.."
bin_dir=${MOETUNE_GPU_BIN:-}
if [ -z "$bin_dir" ]; then
  bin_dir=build-gpu/tests/gpu
  cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DMOETUNE_GPU_TESTS=ON >/dev/null &&
    cmake --build build-gpu -j"$(nproc)" || { echo "run_all: build failed"; exit 1; }
fi
logs=${MOETUNE_GPU_LOGS:-${OUT:-build-gpu/logs}}
mkdir -p "$logs"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader 2>/dev/null |
  sed 's/^/gpu: /'
rows=()
status=0
for t in "$bin_dir"/gpu_test_*; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  start=$(date +%s)
  "$t" --gtest_color=no >"$logs/$name.log" 2>&1
  rc=$?
  secs=$(( $(date +%s) - start ))
  passed=$(grep -c '^\[       OK \]' "$logs/$name.log")
  failed=$(grep -cE '^\[  FAILED  \] .* \([0-9]+ ms\)$' "$logs/$name.log")
  skipped=$(grep -cE '^\[  SKIPPED \] .* \([0-9]+ ms\)$' "$logs/$name.log")
  [ $rc -ne 0 ] && status=1
  rows+=("$(printf '%-34s %-4s %6s %6s %7s %6ss' "$name" "$([ $rc -eq 0 ] && echo ok || echo FAIL)" \
    "$passed" "$failed" "$skipped" "$secs")")
  grep -E '^(FAIL|.*Failure$)' "$logs/$name.log" | head -20
done
[ ${#rows[@]} -eq 0 ] && { echo "run_all: no gpu_test_* binaries in $bin_dir"; exit 1; }
printf '%-34s %-4s %6s %6s %7s %7s\n' test rc passed failed skipped time
printf '%s\n' "${rows[@]}"
exit $status
