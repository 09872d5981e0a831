#!/bin/bash
# Builds main with a kernel patch applied (a diff kept under bench/results/, e.g. a change that
# waits for a GPU check) into .devbin/NAME/ (moetune, gpu_test_moe_sliced, commit.txt), for
# stage_ab.sh's side NAME. The patch is applied in a throwaway worktree, so the checkout is not
# touched. Usage: bench/scripts/patch_build_devbin.sh PATCH NAME [BUILD_DIR]
#   e.g. bench/scripts/patch_build_devbin.sh \
#          bench/results/2026-12-07_thirtyseventh_session/sliced_steal.diff steal
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
patch=$(realpath "$1")
name=$2
wt=$(mktemp -d /tmp/moetune-patch-XXXXXX)
build=${3:-$wt-build}
trap 'git -C "$root" worktree remove --force "$wt" >/dev/null 2>&1 || true' EXIT
git -C "$root" worktree add --detach "$wt" HEAD >/dev/null
git -C "$wt" apply "$patch"
[ -f "$build/build.ninja" ] ||
  cmake -S "$wt" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMOETUNE_GPU_TESTS=ON >/dev/null
cmake --build "$build" --target moetune gpu_test_moe_sliced -j"$(nproc)"
mkdir -p "$root/.devbin/$name"
cp "$build/src/cli/moetune" "$build/tests/gpu/gpu_test_moe_sliced" "$root/.devbin/$name/"
{ git -C "$root" log -1 --format='%H %s'; echo "plus $1"; } >"$root/.devbin/$name/commit.txt"
"$root/bench/scripts/check_ldd.sh" "$root/.devbin/$name/moetune"
