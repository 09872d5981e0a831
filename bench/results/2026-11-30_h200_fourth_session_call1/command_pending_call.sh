#!/bin/bash
# bench/PENDING.md items 0, 1, 2 and 4 in one device call, on nvidia-h200-x2 (carry .devbin),
# from main's checkout (.devbin built at the end of the third 2026-11-30 session:
# .devbin/ = main, .devbin/fold/ = branch fold-topk, .devbin/quality/ = the quality run's binary
# and record logs):
#   GPU 1: issue 4's quality bar at M = 1024, resumed from .devbin/quality/runs.tar.gz (deadline
#          QDL s; run this script again at once to continue while warm: /tmp/qwork persists);
#   GPU 0: item 0 (main's check of the new defaults, bench of the anchors), item 2 (fold-topk
#          A/B through bench/scripts/layer_ab_verify.sh), item 4 (fp8 decode GEMM2 n128 A/B);
#          nothing more in later calls. Call with QDL=540 and timeout_s 600.
# Everything lands in one tarball under $OUT; a summary prints last.
set -u
R=/tmp/res; mkdir -p $R/q $R/main $R/fold
{ date -u; for d in . fold quality; do echo "$d: $(head -c 100 .devbin/$d/commit.txt)"; done; nvidia-smi -L; } > $R/env.txt
( export CUDA_VISIBLE_DEVICES=1 OUT=$R/q QUALITY_WORK=/tmp/qwork QUALITY_DEADLINE_S=${QDL:-520}
  export QUALITY_BATCH=1024 MOETUNE_BIN=.devbin/quality/moetune QUALITY_SEED=.devbin/quality/runs.tar.gz
  bash bench/scripts/tune_quality.sh > $R/q/driver.log 2>&1; echo "quality rc $?" >> $R/q/driver.log ) &
qpid=$!
export CUDA_VISIBLE_DEVICES=0 MOETUNE_CACHE_DIR=/tmp/moetune_main_cache
step() {  # step NAME SECONDS command...
  local name=$1 secs=$2; shift 2; local t0=$(date +%s)
  timeout -k 5 "$secs" "$@" > "$R/main/$name.txt" 2>&1
  echo "$name: exit $? in $(( $(date +%s) - t0 )) s" >> $R/main/summary.txt
}
if [ ! -f /tmp/gpu0.done ]; then
  step check 100 .devbin/moetune check --batch 1,2,1024,4096 --variants bf16,fp8_block --configs 1 --layer-only
  step check_glm 60 .devbin/moetune check --model glm-4.5 --tp 8 --batch 1,8,64 --configs 1 --layer-only
  for m in "qwen3.5-122b-a10b-fp8 --tp 4" "deepseek-v3 --tp 8" "qwen3.5-122b-a10b --tp 4"; do
    # shellcheck disable=SC2086
    step "bar_${m%% *}" 60 .devbin/moetune bench --model $m --measured-ceilings --batch 1,8,16,32,64,128,256,1024,4096
  done
  OUT=$R/fold BASE=. NEW=fold BENCH_BATCH=1,8,64,256 CHECK_BATCH=1,8,64,257 \
    timeout 360 bash bench/scripts/layer_ab_verify.sh > $R/fold/driver.log 2>&1
  # Item 4: fp8 decode GEMM2 n128 k64 s3 against the default n64 k64 s5 (layer A/B).
  for m in "qwen3.5-122b-a10b-fp8 --tp 4" "deepseek-v3 --tp 8"; do
    # shellcheck disable=SC2086
    step "ab_fp8dec_${m%% *}" 40 .devbin/moetune bench --model $m --config .devbin/vs/fp8dec_n128.json \
      --vs .devbin/vs/fp8dec_default.json --batch 8,16,32,64,128,256
  done
  touch /tmp/gpu0.done
fi
wait $qpid
tar -czf $OUT/next_call.tgz -C $R .
cp $R/q/runs.tar.gz $OUT/ 2>/dev/null
echo "=== main"; cat $R/main/summary.txt; for f in check check_glm; do grep -vE "^ok " $R/main/$f.txt | tail -n 3; done
for f in $R/main/bar_*.txt $R/main/ab_*.txt; do echo "=== $(basename $f)"; grep -vE "note:" $f | tail -n 10; done
echo "=== fold"; tail -n 45 $R/fold/driver.log
echo "=== quality"; tail -n 10 $R/q/driver.log
