mkdir -p $OUT/p; .devbin/up/gpu_test_moe_decode --gtest_color=no > $OUT/p/test_decode.txt 2>&1; echo "test rc=$?"
timeout 100 .devbin/up/moetune check --batch 1 --configs 2 --variants fp8_block > $OUT/p/check.txt 2>&1; echo "check rc=$?"; tail -1 $OUT/p/check.txt
OUT=$OUT/a SIDES="new up" CHECK_BATCH=none RUNS=5 BENCH_BATCH=1,2 BENCH_MODELS="--model qwen3.5-122b-a10b-fp8 --tp 4" bash bench/scripts/stage_ab.sh > $OUT/p/ab_up.txt 2>&1
grep -A2 "^===" $OUT/p/ab_up.txt | grep -v "^--" | paste - - -
for m in "qwen3.5-122b-a10b-fp8 --tp 4" "deepseek-v3 --tp 8" "qwen3.5-122b-a10b --tp 4"; do timeout 90 .devbin/up/moetune bench --model $m --measured-ceilings --batch 1,8,16,32,64,128,256 2>&1 | tail -11; done > $OUT/p/bars.txt
grep -E "^ +[0-9]+ +[0-9.]+ +\[|TP" $OUT/p/bars.txt | awk '{print $1, $2, $(NF-2), $(NF-1), $NF}'
OUT=$OUT/b SIDES="dense64 up" CHECK_BATCH=none RUNS=2 BENCH_BATCH=68,72,76 BENCH_MODELS="--model olmoe-1b-7b;--model gpt-oss-20b --dtype bf16" bash bench/scripts/stage_ab.sh > $OUT/p/ab_t1.txt 2>&1
OUT=$OUT/c SIDES="dense64 up" CHECK_BATCH=none RUNS=2 BENCH_BATCH=136,160,184 BENCH_MODELS="--model qwen3-30b-a3b" bash bench/scripts/stage_ab.sh > $OUT/p/ab_t2.txt 2>&1
OUT=$OUT/d SIDES="dense64 up" CHECK_BATCH=none RUNS=2 BENCH_BATCH=116,124 BENCH_MODELS="--model qwen3.5-122b-a10b-fp8 --tp 4;--model deepseek-v3 --tp 8" bash bench/scripts/stage_ab.sh > $OUT/p/ab_t3.txt 2>&1
for f in $OUT/p/ab_t*.txt; do sed -n '/^===/,$p' $f | grep -v "exit" | paste -s -d' ' | sed 's/=== /\n/g'; echo; done
