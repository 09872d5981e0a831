# Call 6: the layer with the persistent kernel at its 4-slot ring (--persistent) against the
# default stage GEMMs, both fp8 anchors, M = 8, 16, 32, one run each (the device budget's end); its GPU test first.
set -u
r=/tmp/call6; rm -rf $r; mkdir -p $r
export MOETUNE_CACHE_DIR=/tmp/call6_cache
{ date -u; nvidia-smi --query-gpu=name,uuid --format=csv; cat .devbin/commit.txt; } > $r/env.txt; cat $r/env.txt
timeout -k 5 100 .devbin/gpu_test_moe_persistent --gtest_color=no --gtest_filter='*Matches*' > $r/test.txt 2>&1
echo "test rc $?"; grep -cE "^ok " $r/test.txt; grep -E "^FAIL|FAILED" $r/test.txt | head
for run in 1; do
  for m in "qwen3.5-122b-a10b-fp8 --tp 4" "deepseek-v3 --tp 8"; do
    for side in on off; do
      f=""; [ $side = on ] && f=--persistent
      tag=$(echo $m | cut -c1-4)_${side}_$run
      timeout -k 5 45 .devbin/moetune bench --model $m --measured-ceilings --batch 8,16,32 $f > $r/bench_$tag.txt 2>&1
      echo "bench $tag rc $?"
    done
  done
done
tar -czf $OUT/call6.tgz -C $r .
for f in $r/bench_*; do echo "== $(basename $f .txt)"; grep -E "^ +[0-9]+ +[0-9.]+ +\[" $f | awk '{print $1, $2, $6}'; done
