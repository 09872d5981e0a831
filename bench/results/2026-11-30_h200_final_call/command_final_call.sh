#!/bin/bash
# Third session's last device call, nvidia-h200-x2, carry .devbin (main ab09acc in .devbin/,
# cfbd73d in .devbin/main/, A/B tables in .devbin/vs/). QDL = the quality bar's deadline (s).
#   GPU 1: issue 4's quality bar at M = 1024 only (QUALITY_BATCH=1024), packed to runs.tar.gz
#          for the next session (QUALITY_SEED; same binary: .devbin/quality/moetune).
#   GPU 0: merged main's correctness (gpu_test_moe_pdl; check fp8 block at 1024/4096 for the
#          bounded kernels; check bf16/fp16 at decode sizes for GEMM2 s3), the two A/B tables
#          (bench --config/--vs), then the speed-bar bench of the three anchors.
set -u
R=/tmp/res3; mkdir -p $R/q $R/g
{ date -u; head -c 120 .devbin/commit.txt; echo; nvidia-smi -L; } > $R/env.txt
( export CUDA_VISIBLE_DEVICES=1 OUT=$R/q QUALITY_WORK=/tmp/qwork3 QUALITY_DEADLINE_S=${QDL:-520}
  export QUALITY_BATCH=1024 MOETUNE_BIN=.devbin/quality/moetune
  bash bench/scripts/tune_quality.sh > $R/q/driver.log 2>&1; echo "quality rc $?" >> $R/q/driver.log ) &
qpid=$!
export CUDA_VISIBLE_DEVICES=0 MOETUNE_CACHE_DIR=/tmp/moetune_cache3
B=.devbin/moetune
step() {  # step NAME SECONDS command...
  local name=$1 secs=$2; shift 2; local t0=$(date +%s)
  timeout -k 5 "$secs" "$@" > "$R/g/$name.txt" 2>&1
  echo "$name: exit $? in $(( $(date +%s) - t0 )) s" >> $R/g/summary.txt
}
step test_pdl 60 .devbin/gpu_test_moe_pdl --gtest_color=no
step check_fp8 110 $B check --batch 1024,4096 --variants fp8_block --configs 1 --layer-only
step check_16bit 90 $B check --batch 1,3,8,64,257 --variants bf16,fp16 --configs 1 --layer-only
for run in 1 2; do
  step ab_bf16_$run 40 $B bench --model qwen3.5-122b-a10b --tp 4 --config .devbin/vs/bf16_s3.json \
    --vs .devbin/vs/bf16_s5.json --batch 1,2,8,64,256
done
step ab_fp8_qwen 40 $B bench --model qwen3.5-122b-a10b-fp8 --tp 4 --config .devbin/vs/fp8_n64s3.json \
  --vs .devbin/vs/fp8_default.json --batch 1024,4096
step ab_fp8_dsv3 60 $B bench --model deepseek-v3 --tp 8 --config .devbin/vs/fp8_n64s3.json \
  --vs .devbin/vs/fp8_default.json --batch 1024,4096
for m in "qwen3.5-122b-a10b-fp8 --tp 4" "deepseek-v3 --tp 8" "qwen3.5-122b-a10b --tp 4"; do
  tag=${m%% *}
  # shellcheck disable=SC2086
  step bar_$tag 90 $B bench --model $m --measured-ceilings --batch 1,8,16,32,64,128,256,1024,4096
done
wait $qpid
tar -czf $OUT/final_call.tgz -C $R .
cp $R/q/runs.tar.gz $OUT/ 2>/dev/null
cat $R/g/summary.txt; grep -E "\[  (FAILED|PASSED) " $R/g/test_pdl.txt
for f in check_fp8 check_16bit; do grep -vE "^ok " $R/g/$f.txt | tail -n 3; done
for f in $R/g/ab_*.txt; do echo "=== $(basename $f)"; grep -vE "note:" $f | tail -n 8; done
for f in $R/g/bar_*.txt; do echo "=== $(basename $f)"; grep -vE "note:" $f | tail -n 11; done
echo "=== quality"; tail -n 8 $R/q/driver.log
