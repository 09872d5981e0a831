#!/bin/bash
# Builds what bench/scripts/issue5_align_call.sh carries in .devbin (about 12 minutes on 2 CPUs
# after the apt packages): pdl_build_devbin.sh (moetune and the GPU tests of this checkout), then
# two variants of src/moe/stages.hpp's routing + alignment launch, each built into its own
# folder and the file restored after: .devbin/ra16 (kRouteAlignMaxTokens = 16, 256 threads: two
# tokens per warp at M = 16) and .devbin/ra16w (the same with kRouteAlignThreads = 512).
# Usage: bench/scripts/issue5_build.sh [BUILD_DIR]   (default build-pdl)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-pdl}
stages=$root/src/moe/stages.hpp
git -C "$root" diff --quiet -- "$stages" || { echo "issue5_build: $stages has local changes"; exit 2; }
"$root/bench/scripts/pdl_build_devbin.sh" "$build"
trap 'git -C "$root" checkout -- "$stages"' EXIT
variant() {  # NAME SED-EXPRESSION...
  local name=$1; shift
  git -C "$root" checkout -- "$stages"
  for e in "$@"; do sed -i "$e" "$stages"; done
  git -C "$root" diff --quiet -- "$stages" && { echo "issue5_build: $name changed nothing"; exit 2; }
  cmake --build "$build" --target moetune -j"$(nproc)"
  mkdir -p "$root/.devbin/$name"
  cp "$build/src/cli/moetune" "$root/.devbin/$name/"
}
variant ra16 's/kRouteAlignMaxTokens = 5;/kRouteAlignMaxTokens = 16;/'
variant ra16w 's/kRouteAlignMaxTokens = 5;/kRouteAlignMaxTokens = 16;/' \
  's/kRouteAlignThreads = 256;/kRouteAlignThreads = 512;/'
git -C "$root" checkout -- "$stages"
cmake --build "$build" --target moetune -j"$(nproc)"  # the build dir matches the checkout again
"$root/bench/scripts/check_ldd.sh" "$root/.devbin/ra16/moetune" "$root/.devbin/ra16w/moetune"
ls -la "$root/.devbin" "$root/.devbin/ra16" "$root/.devbin/ra16w"
