#!/bin/bash
# bench/PENDING.md items 1, 1b and 2 (the fifth session): three nvidia-h200-x2 calls made back to
# back (the machine stays warm, so /tmp persists), each `PHASE=N bash bench/scripts/pending_call.sh`,
# carry .devbin (main's moetune from pdl_build_devbin.sh, the seeds in .devbin/quality), timeout 600.
#   PHASE=1  GPU 0: issue 4's quality bar at M = 64, resumed from q64_runs.tar.gz (deadline QDL s).
#            GPU 1: `check` at issue 3's sizes and the three anchors' bench with the measured
#            ceilings (issues 3 and 5's bars), then the quality bar at M = 1024 with main's tuner
#            (a normal sweep against the finished exhaustive log runs_m1024_ex.tar.gz).
#   PHASE=2  GPU 0: the default 18-size sweep from a cold JIT cache (issue 4's 10-minute bar), then
#            the same sweep over that cache (the 5-minute bar) if enough of the call is left.
#            GPU 1: the M = 64 quality run continued (if PHASE 1 did not finish it).
#   PHASE=3  the warm sweep if PHASE 2 had no time for it, then the two-GPU sweep from a fresh
#            cache (the 0.65x bar); the M = 64 quality run continued on GPU 1 first if still open.
#   PHASE=4  (after successive halving was fixed to keep a share of each round's own configs; a
#            fresh machine) GPU 0: the cold sweep; GPU 1 meanwhile: the quality bar at M = 64 and
#            M = 1024, a normal sweep against each finished exhaustive log (.devbin/quality/
#            q64_ex.tar.gz, m1024_ex.tar.gz); then the two-GPU sweep from a fresh cache; then the
#            warm sweep over the cold one's cache if the call has time left (CALL_S).
# Everything lands in $OUT/call.tgz; a summary prints last.
set -u
R=/tmp/res_pending; mkdir -p "$R/q64" "$R/q1024" "$R/bars" "$R/sweep"
t0=$(date +%s)
left() { echo $((${CALL_S:-585} - ($(date +%s) - t0))); }
{ date -u; echo "PHASE ${PHASE:-1}"; head -c 120 .devbin/commit.txt; echo; nvidia-smi -L; } >> "$R/env.txt"

# q64 GPU DEADLINE: the M = 64 quality run (seeded once, then resumed from /tmp/qwork_64).
q64() {
  [ -f /tmp/q64.finished ] && return 0
  CUDA_VISIBLE_DEVICES=$1 MOETUNE_COMPILE_THREADS=${Q_THREADS:-24} OUT=$R/q64 QUALITY_WORK=/tmp/qwork_64 \
    QUALITY_BATCH=64 QUALITY_DEADLINE_S=$2 QUALITY_SEED=.devbin/quality/q64_runs.tar.gz \
    MOETUNE_CACHE_DIR=/tmp/moetune_q64_cache bash bench/scripts/tune_quality.sh >> "$R/q64/driver.log" 2>&1
  local rc=$?
  echo "quality M=64 rc $rc ($(date -u +%T))" >> "$R/q64/driver.log"
  ((rc != 3)) && touch /tmp/q64.finished
}
# sweep LABEL CACHE RUNS TIMEOUT [args]: one default sweep (tune_speed.sh) into its own folder;
# RUNS=cold empties the JIT cache CACHE first, RUNS=warm uses what an earlier sweep left in it.
sweep() {
  local label=$1 cache=$2 runs=$3 to=$4; shift 4
  OUT=$R/sweep/$label TUNE_RUNS=$runs TUNE_RUN_TIMEOUT=$to TUNE_CACHE_DIR=/tmp/moetune_sweep_$cache \
    bash bench/scripts/tune_speed.sh "$@" > "$R/sweep/$label.log" 2>&1
}

case ${PHASE:-1} in
1)
  ( export CUDA_VISIBLE_DEVICES=1 MOETUNE_COMPILE_THREADS=6 MOETUNE_CACHE_DIR=/tmp/moetune_bars_cache
    timeout 200 .devbin/moetune check --variants bf16,fp8_block --configs 1 --layer-only > "$R/bars/check.txt" 2>&1
    echo "check rc $?" >> "$R/bars/check.txt"
    for m in "qwen3.5-122b-a10b --tp 4" "qwen3.5-122b-a10b-fp8 --tp 4" "deepseek-v3 --tp 8"; do
      # shellcheck disable=SC2086
      timeout 60 .devbin/moetune bench --model $m --measured-ceilings \
        --batch 1,8,16,32,64,128,256,1024,4096 > "$R/bars/bench_${m%% *}.txt" 2>&1
    done
    OUT=$R/q1024 QUALITY_WORK=/tmp/qwork_1024 QUALITY_BATCH=1024 QUALITY_DEADLINE_S=$(($(left) - 15)) \
      QUALITY_SEED=.devbin/quality/runs_m1024_ex.tar.gz MOETUNE_CACHE_DIR=/tmp/moetune_q1024_cache \
      bash bench/scripts/tune_quality.sh > "$R/q1024/driver.log" 2>&1
    echo "quality M=1024 rc $?" >> "$R/q1024/driver.log" ) &
  q64 0 "${QDL:-$(($(left) - 10))}"
  wait ;;
2)
  ( Q_THREADS=12 q64 1 $(($(left) - 10)) ) &
  export CUDA_VISIBLE_DEVICES=0
  sweep one_cold one cold 400
  (($(left) > 270)) && sweep one_warm one warm $(($(left) - 10))
  wait ;;
3)
  [ -f /tmp/q64.finished ] || Q_THREADS=16 q64 1 240 &
  [ -f "$R/sweep/one_warm.log" ] || CUDA_VISIBLE_DEVICES=0 sweep one_warm one warm 280
  wait
  MOETUNE_COMPILE_THREADS=8 sweep two_cold two cold $(($(left) - 10)) --gpus 2 ;;
4)
  ( export CUDA_VISIBLE_DEVICES=1 MOETUNE_COMPILE_THREADS=8
    for m in 64 1024; do
      seed=.devbin/quality/q64_ex.tar.gz; [ $m = 1024 ] && seed=.devbin/quality/m1024_ex.tar.gz
      OUT=$R/q$m QUALITY_WORK=/tmp/qwork4_$m QUALITY_BATCH=$m QUALITY_DEADLINE_S=200 QUALITY_SEED=$seed \
        MOETUNE_CACHE_DIR=/tmp/moetune_q4_cache bash bench/scripts/tune_quality.sh > "$R/q$m/driver.log" 2>&1
      echo "quality M=$m rc $?" >> "$R/q$m/driver.log"
    done ) &
  CUDA_VISIBLE_DEVICES=0 sweep one_cold one cold 330
  wait
  MOETUNE_COMPILE_THREADS=8 sweep two_cold two cold 240 --gpus 2
  (($(left) > 215)) && CUDA_VISIBLE_DEVICES=0 sweep one_warm one warm $(($(left) - 8)) ;;
esac

tar -czf "$OUT/call.tgz" -C "$R" .
echo "=== sweeps"
for f in "$R"/sweep/*.log; do [ -f "$f" ] && { echo "--- $f"; grep -E "cache: wall|measurements in" "$f"; }; done
echo "=== quality"; tail -n 4 "$R/q64/driver.log" "$R/q1024/driver.log" 2>/dev/null
[ -f "$R/q64/quality.md" ] && tail -n 6 "$R/q64/quality.md"
[ -f "$R/q1024/quality.md" ] && tail -n 6 "$R/q1024/quality.md"
if [ "${PHASE:-1}" = 1 ]; then
  echo "=== bars"; grep -vE "^ok " "$R/bars/check.txt" | tail -n 3
  for f in "$R"/bars/bench_*.txt; do echo "--- $f"; grep -v note: "$f" | tail -n 10; done
fi
