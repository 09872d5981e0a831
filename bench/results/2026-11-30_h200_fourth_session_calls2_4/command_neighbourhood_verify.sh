#!/bin/bash
# The tuner's neighbourhood step and the fp8 decode GEMM2 default on an H200, in one
# nvidia-h200-x2 call (carry .devbin, built from main by pdl_build_devbin.sh; timeout 600):
#   GPU 0: the default 18-size sweep from a cold JIT cache (tune_speed.sh TUNE_RUNS=cold), the
#          issue 4 time bar with the neighbourhood's extra configs;
#   GPU 1: the quality bar at M = 1024: a normal sweep with this binary against the finished
#          exhaustive log of the third session (QUALITY_SEED: its runs without the old tuned run;
#          the kernels are unchanged since, so its records time the same kernels); then `check`
#          of the fp8 decode default and `bench` of both fp8 anchors at decode sizes.
# SWEEP_TIMEOUT (default 520) caps the sweep. Everything lands in $OUT/call.tgz; a summary last.
# Run the same script with PHASE=warm right after (the machine still warm): GPU 0's sweep again
# over the kept cache, then the two-GPU sweep from a fresh cache (the 0.65x bar).
set -u
R=/tmp/res_nb; mkdir -p "$R"
{ date -u; head -c 120 .devbin/commit.txt; echo; nvidia-smi -L; } > "$R/env_${PHASE:-cold}.txt"
if [ "${PHASE:-cold}" = cold ]; then
  mkdir -p "$R/sweep" "$R/q" "$R/dec"
  ( export CUDA_VISIBLE_DEVICES=1
    OUT=$R/q QUALITY_WORK=/tmp/qwork_nb QUALITY_BATCH=1024 QUALITY_DEADLINE_S=300 \
      QUALITY_SEED=.devbin/quality/runs_m1024_ex.tar.gz MOETUNE_CACHE_DIR=/tmp/moetune_q_cache \
      bash bench/scripts/tune_quality.sh > "$R/q/driver.log" 2>&1
    echo "quality rc $?" >> "$R/q/driver.log"
    timeout 150 .devbin/moetune check --batch 8,32,64,256 --variants fp8_block --configs 1 \
      --layer-only > "$R/dec/check.txt" 2>&1
    echo "check rc $?" >> "$R/dec/check.txt"
    for m in "qwen3.5-122b-a10b-fp8 --tp 4" "deepseek-v3 --tp 8"; do
      # shellcheck disable=SC2086
      timeout 60 .devbin/moetune bench --model $m --measured-ceilings --batch 8,16,32,64,128,256 \
        > "$R/dec/bench_${m%% *}.txt" 2>&1
    done ) &
  gpu1=$!
  CUDA_VISIBLE_DEVICES=0 OUT=$R/sweep TUNE_RUNS=cold TUNE_RUN_TIMEOUT=${SWEEP_TIMEOUT:-520} \
    TUNE_CACHE_DIR=/tmp/moetune_sweep_cache bash bench/scripts/tune_speed.sh > "$R/sweep/driver.log" 2>&1
  wait "$gpu1"
else
  mkdir -p "$R/warm" "$R/two"
  CUDA_VISIBLE_DEVICES=0 OUT=$R/warm TUNE_RUNS=warm TUNE_RUN_TIMEOUT=290 \
    TUNE_CACHE_DIR=/tmp/moetune_sweep_cache bash bench/scripts/tune_speed.sh > "$R/warm/driver.log" 2>&1
  OUT=$R/two TUNE_RUNS=cold TUNE_RUN_TIMEOUT=290 MOETUNE_COMPILE_THREADS=8 \
    TUNE_CACHE_DIR=/tmp/moetune_sweep2_cache bash bench/scripts/tune_speed.sh --gpus 2 > "$R/two/driver.log" 2>&1
fi
tar -czf "$OUT/call.tgz" -C "$R" .
for f in "$R"/sweep/driver.log "$R"/warm/driver.log "$R"/two/driver.log; do
  [ -f "$f" ] && { echo "=== $f"; grep -E "wall|measurements" "$f"; tail -n 22 "$f"; }
done
[ -d "$R/q" ] && { echo "=== quality"; tail -n 8 "$R/q/driver.log"; }
[ -d "$R/dec" ] && { echo "=== fp8 decode default"; tail -n 2 "$R/dec/check.txt";
  for f in "$R"/dec/bench_*.txt; do echo "--- $f"; grep -v note: "$f" | tail -n 7; done; }
