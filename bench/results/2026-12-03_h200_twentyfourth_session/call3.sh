# Call 3: issue 5's bars at the commit that lands the hoisted table reads (the fold reverted):
# the GPU tests of .devbin, then final_bars.sh (bench --measured-ceilings at M = 1..256 on the
# three anchors, then check of bf16 and block fp8 against fp64 with the time left).
set -u
mkdir -p "$OUT/t"
for t in gpu_test_moe_stages gpu_test_moe_pdl gpu_test_moe_decode; do
  timeout 150 ".devbin/$t" --gtest_color=no > "$OUT/t/$t.txt" 2>&1; echo "$t rc=$?"
  grep -E "^\[  (FAILED|PASSED) " "$OUT/t/$t.txt"
done
OUT=$OUT/bars BENCH_BATCH=1,8,16,32,64,128,256 CHECK_S=200 bash bench/scripts/final_bars.sh
cat "$OUT/bars/env.txt"
