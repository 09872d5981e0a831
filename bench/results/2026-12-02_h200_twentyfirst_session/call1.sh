# Call 1: the persistent GEMM kernel's first run (aefebc6). Its GPU test (against the stage
# GEMMs, repeated launches, graphs), a layer A/B against --no-persistent on both fp8 anchors
# (bench --measured-ceilings, interleaved, two runs), then the fp64 check at M = 8, 32.
set -u
r=/tmp/call1; rm -rf $r; mkdir -p $r
export MOETUNE_CACHE_DIR=/tmp/call1_cache
{ date -u; nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.max.sm --format=csv; cat .devbin/commit.txt; } > $r/env.txt
cat $r/env.txt
timeout -k 5 150 .devbin/gpu_test_moe_persistent --gtest_color=no > $r/test.txt 2>&1
echo "test rc $?"; grep -E "^(ok|FAIL) |FAILED|PASSED|Failure|error" $r/test.txt | head -40
B=5,8,12,16,24,32
for run in 1 2; do
  for m in "qwen3.5-122b-a10b-fp8 --tp 4" "deepseek-v3 --tp 8"; do
    for side in on off; do
      f=""; [ $side = off ] && f=--no-persistent
      tag=$(echo $m | cut -c1-4)_${side}_$run
      timeout -k 5 70 .devbin/moetune bench --model $m --measured-ceilings --batch $B $f > $r/bench_$tag.txt 2>&1
      echo "bench $tag rc $?"
    done
  done
done
timeout -k 5 100 .devbin/moetune check --batch 8,32 --configs 1 --variants fp8_block > $r/check.txt 2>&1
echo "check rc $?: ok $(grep -c '^ok' $r/check.txt), not ok: $(grep -cvE '^ok ' $r/check.txt)"
grep -vE "^ok " $r/check.txt | tail -4
tar -czf $OUT/call1.tgz -C $r .
for f in $r/bench_*; do echo "== $(basename $f .txt)"; grep -E "^ +[0-9]+ +[0-9.]+ +\[" $f | awk '{print $1, $2, $6, $NF, $(NF-3)}'; done
