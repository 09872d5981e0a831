#!/bin/bash
# On a device machine (repository root, .devbin/moetune from bench/scripts/pdl_build_devbin.sh):
# the layer with swap-AB defaults (block fp8, sm_90a, M*topk/E 0.25..8). check (layer, the
# defaults, bf16 and block fp8 anchors), then bench --vs the former defaults (tables in
# bench/results/2026-11-30_h200_swapab/tables, written by the build before the rule) on
# Qwen3.5 TP4 fp8 and DeepSeek-V3 TP8 fp8 at the decode sizes, then GEMM2 at s2 against s3.
set -uo pipefail
out=${OUT:-$PWD/swapab_layer_out}
mkdir -p "$out"
t=bench/results/2026-11-30_h200_swapab/tables
export MOETUNE_CACHE_DIR=${MOETUNE_CACHE_DIR:-/tmp/moetune-cache}
bin=.devbin/moetune
{ date -u; nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.max.sm --format=csv;
  cat .devbin/commit.txt; } >"$out/env.txt" 2>&1
timeout 200 $bin check --variants bf16,fp8_block --configs 1 --layer-only >"$out/check.txt" 2>&1
echo "check rc=$?: $(tail -1 "$out/check.txt")"
B=${SWAP_BATCH:-1,8,16,32,64,128,256}
timeout 150 $bin bench --model qwen3.5-122b-a10b-fp8 --tp 4 --measured-ceilings --batch "$B" \
  --vs $t/old_qwen.json >"$out/bench_qwen.txt" 2>&1
echo "bench qwen rc=$?"
timeout 150 $bin bench --model deepseek-v3 --tp 8 --measured-ceilings \
  --batch "$B" --vs $t/old_dsv3.json >"$out/bench_dsv3.txt" 2>&1
echo "bench dsv3 rc=$?"
timeout 100 $bin bench --model qwen3.5-122b-a10b-fp8 --tp 4 --batch 8,64,256 \
  --config $t/s2_qwen.json --vs $t/new_qwen.json >"$out/bench_qwen_s2.txt" 2>&1
echo "bench qwen s2 rc=$?"
for f in check bench_qwen bench_dsv3 bench_qwen_s2; do echo "== $f"; tail -n 30 "$out/$f.txt"; done
