#!/bin/bash
# On a device machine (repository root, .devbin/moetune from bench/scripts/pdl_build_devbin.sh at
# the commit in .devbin/commit.txt): the final swap-AB defaults (block fp8, sm_90a, spe 0.25..1
# and 2..8, down s2). check of the fp8 layer with the defaults and random configs (swap-AB among
# them), then bench --vs the former defaults (bench/results/2026-11-30_h200_swapab/tables) on
# Qwen3.5 TP4 fp8 and DeepSeek-V3 TP8 at issue 3's and issue 5's sizes, with the measured floor.
set -uo pipefail
out=${OUT:-$PWD/swapab_final_out}
mkdir -p "$out"
t=bench/results/2026-11-30_h200_swapab/tables
export MOETUNE_CACHE_DIR=${MOETUNE_CACHE_DIR:-/tmp/moetune-cache}
bin=.devbin/moetune
{ date -u; nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.max.sm --format=csv;
  cat .devbin/commit.txt; } >"$out/env.txt" 2>&1
timeout 150 $bin check --variants fp8_block --batch 1,8,16,64,256 --configs 3 --layer-only \
  >"$out/check.txt" 2>&1
echo "check rc=$?: $(tail -1 "$out/check.txt")"
B=1,8,16,32,64,128,256,1024,4096
timeout 170 $bin bench --model qwen3.5-122b-a10b-fp8 --tp 4 --measured-ceilings --batch $B \
  --vs $t/old_qwen.json >"$out/bench_qwen.txt" 2>&1
echo "bench qwen rc=$?"
timeout 170 $bin bench --model deepseek-v3 --tp 8 --measured-ceilings --batch $B \
  --vs $t/old_dsv3.json >"$out/bench_dsv3.txt" 2>&1
echo "bench dsv3 rc=$?"
grep -E "^(FAIL|fail)" "$out/check.txt" | head
for f in bench_qwen bench_dsv3; do echo "== $f"; tail -n 36 "$out/$f.txt"; done
