#!/bin/bash
# On a device machine (repository root, .devbin/moetune from pdl_build_devbin.sh): the speed bars
# of issues 3 and 5 with main's defaults (bench --measured-ceilings, cold, CUDA graph, PDL, on the
# three anchor shapes at issue 3's and issue 5's sizes), then issue 3's check set with whatever
# time is left (bf16 and block fp8, the defaults, layer). Output in $OUT. Env: BENCH_BATCH, CHECK_S,
# FLAGS (extra options for bench and check, e.g. FLAGS=--align-in-gemm1 to take the bars with an
# opt-in path before it becomes the default, without a rebuild).
set -uo pipefail
out=${OUT:-$PWD/final_bars_out}
mkdir -p "$out"
export MOETUNE_CACHE_DIR=${MOETUNE_CACHE_DIR:-/tmp/moetune-cache}
{ date -u; nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.max.sm --format=csv;
  cat .devbin/commit.txt; } >"$out/env.txt" 2>&1
B=${BENCH_BATCH:-1,8,16,32,64,128,256,1024,4096}
F=${FLAGS:-}
echo "flags: ${F:-none}" >>"$out/env.txt"
i=0
for model in "--model qwen3.5-122b-a10b-fp8 --tp 4" "--model deepseek-v3 --tp 8" \
             "--model qwen3.5-122b-a10b --tp 4"; do
  # shellcheck disable=SC2086
  timeout 60 .devbin/moetune bench $model $F --measured-ceilings --batch $B >"$out/bench_$i.txt" 2>&1
  echo "bench $i rc=$?"; tail -n 10 "$out/bench_$i.txt"
  i=$((i + 1))
done
# shellcheck disable=SC2086
timeout ${CHECK_S:-200} .devbin/moetune check $F --variants bf16,fp8_block --configs 1 --layer-only \
  >"$out/check.txt" 2>&1
echo "check rc=$?: ok $(grep -c '^ok' "$out/check.txt"), $(tail -n 1 "$out/check.txt")"
grep -vE "^ok " "$out/check.txt" | head -5
