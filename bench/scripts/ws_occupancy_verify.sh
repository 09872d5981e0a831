#!/bin/bash
# One device call (about 5 minutes, nvidia-h200) for the warp-specialized fp8 GEMM1 at 3 blocks
# per SM (tile_math::gemm_wgmma_min_blocks: __launch_bounds__ min blocks 3, setmaxnreg 48/112).
# Carry .devbin with two builds:
#   .devbin/main/{moetune,test_gemm_speed}                 main (before)
#   .devbin/ws/{moetune,test_gemm_mma,test_gemm_speed}      this branch
# (bench/scripts/gemm_build_devbin.sh + the moetune binary, each into its folder).
# Steps: test_gemm_mma (every config against the fp64 reference, the bounded ones included);
# the GEMM phase alone (test_gemm_speed: GEMM1 + GEMM2, cold, graph) for the bounded configs
# and a control, main and branch interleaved twice, at M = 1024, 4096 on both fp8 anchor shapes;
# moetune check (layer) at M = 1024, 4096; moetune bench A/B of the layer; ncu of the bounded
# kernel (what the driver really runs: registers, blocks per SM, occupancy). Summary last.
set -uo pipefail
out=/tmp/ws_res; mkdir -p "$out" "${OUT:=$PWD/ws_out}"
export MOETUNE_CACHE_DIR=/tmp/moetune_ws_cache
{ date -u; cat .devbin/ws/commit.txt .devbin/main/commit.txt; nvidia-smi -L; } > "$out/env.txt"
step() {  # step NAME SECONDS command...
  local name=$1 secs=$2; shift 2
  local t0=$(date +%s)
  timeout -k 5 "$secs" "$@" >"$out/$name.txt" 2>&1
  echo "$name: exit $? in $(( $(date +%s) - t0 )) s" | tee -a "$out/summary.txt"
}
step mma 150 .devbin/ws/test_gemm_mma --gtest_color=no --gtest_filter='*Fp8Block*'
# GEMM phase: the three bounded GEMM1 configs (m64n64 w4 s2/s3/s4) and an unbounded control
# (m64n128 s4, identical code on both sides: its difference is the run-to-run spread).
export MOETUNE_GEMM_BENCH_M=1024,4096 MOETUNE_GEMM_BENCH_SHAPES=fp8b
export MOETUNE_GEMM_BENCH_CONFIGS=m64n64k128_g8_w4_s4_sk1,m64n64k128_g8_w4_s3_sk1,m64n64k128_g8_w4_s2_sk1,m64n128k128_g8_w4_s4_sk1
for run in 1 2; do
  for side in main ws; do
    mkdir -p "$out/speed_${side}_$run"
    MOETUNE_GEMM_BENCH_OUT="$out/speed_${side}_$run" step "speed_${side}_$run" 60 \
      ".devbin/$side/test_gemm_speed" --gtest_color=no --gtest_filter='GemmSpeed.*'
  done
done
step check 60 .devbin/ws/moetune check --batch 1024,4096 --configs 1 --layer-only
for model in "--model qwen3.5-122b-a10b-fp8 --tp 4" "--model deepseek-v3 --tp 8"; do
  tag=$(echo "$model" | tr -c 'a-z0-9' _)
  for side in main ws; do
    # shellcheck disable=SC2086
    step "bench_${side}_$tag" 40 ".devbin/$side/moetune" bench $model --batch 256,1024,4096
  done
done
# What the driver actually gives the bounded kernel (registers, blocks per SM, occupancy): ncu of
# the branch's GEMM1 m64n64k128 s4 at M = 4096 (main's: bench/results/2026-11-30_h200_ncu).
mkdir -p "$out/ncu"
OUT="$out/ncu" GEMM_SPEED_BIN=.devbin/ws/test_gemm_speed NCU_CONFIGS=m64n64k128_g8_w4_s4_sk1 \
  timeout -k 5 120 bash bench/scripts/gemm_ncu.sh > "$out/ncu.txt" 2>&1
echo "ncu: exit $?" | tee -a "$out/summary.txt"
tar -czf "$OUT/ws.tgz" -C "$out" .
grep -E "^\[  (FAILED|PASSED) |FAILED" "$out/mma.txt" | head -n 10
grep -vE "^ok " "$out/check.txt" | tail -n 4
for f in "$out"/speed_*/gemm_speed.md; do echo "=== $f"; tail -n 12 "$f"; done
for f in "$out"/bench_*.txt; do echo "=== $(basename "$f")"; tail -n 4 "$f"; done
grep -E "Registers Per|Block Limit (Registers|Shared)|Achieved Occupancy|Duration" "$out/ncu.txt" | head -n 12
cat "$out/summary.txt"
