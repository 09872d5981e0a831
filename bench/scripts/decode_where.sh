#!/bin/bash
# On a device machine (repository root, .devbin/moetune from pdl_build_devbin.sh): where issue 5's
# decode time goes on main's defaults. moetune profile (each stage against its own floor) on the
# three anchor shapes at M = 1, 8, 64, 256, then the tuner at M = 8 and 64 on the fp8 and bf16
# Qwen3.5 shapes (what the swap-AB space finds over the defaults). Output in $OUT.
set -uo pipefail
out=${OUT:-$PWD/decode_where_out}
mkdir -p "$out"
export MOETUNE_CACHE_DIR=${MOETUNE_CACHE_DIR:-/tmp/moetune-cache}
cat .devbin/commit.txt >"$out/env.txt"
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv >>"$out/env.txt"
i=0
for model in "--model qwen3.5-122b-a10b-fp8 --tp 4" "--model deepseek-v3 --tp 8" \
             "--model qwen3.5-122b-a10b --tp 4"; do
  # shellcheck disable=SC2086
  timeout 90 .devbin/moetune profile $model --measured-ceilings --batch 1,8,64,256 \
    >"$out/profile_$i.txt" 2>&1
  echo "profile $i rc=$?"; i=$((i + 1))
done
i=0
for model in "--model qwen3.5-122b-a10b-fp8 --tp 4" "--model qwen3.5-122b-a10b --tp 4"; do
  # shellcheck disable=SC2086
  timeout 170 .devbin/moetune tune $model --batch 8,64 --budget ${TUNE_BUDGET:-140s} \
    --out "$out/tune_$i" >"$out/tune_$i.log" 2>&1
  echo "tune $i rc=$?"; i=$((i + 1))
done
for f in "$out"/profile_*.txt; do cat "$f"; done
for d in "$out"/tune_*; do [ -d "$d" ] && grep -hE "^\| (8|64) \|" "$d"/*.report.md | head -8; done
