# Call 1: exp/route-merge (the first top-k <= 8 by a merge over the lanes in route_token<MERGE>,
# used by the routing / route+align kernels and the bulk up path) against main 03bf3b1:
# route_latency both, GPU tests (the tied-rows routing test is new), check at the decode sizes,
# layer A/B, Qwen3.5 fp8 bars.
set -u
mkdir -p "$OUT/p"
{ date -u; nvidia-smi -L; cat .devbin/commit.txt .devbin/main/commit.txt; } > "$OUT/p/env.txt"
.devbin/main/route_latency > "$OUT/p/route_main.txt" 2>&1
.devbin/route_latency > "$OUT/p/route_new.txt" 2>&1
.devbin/test_cuda_device --gtest_color=no > "$OUT/p/test_device.txt" 2>&1; echo "test_cuda_device rc $?"
for t in gpu_test_moe_stages gpu_test_moe_pdl gpu_test_moe_decode; do
  timeout 200 .devbin/$t --gtest_color=no > "$OUT/p/$t.txt" 2>&1; echo "$t rc $?"; done
OUT=$OUT/a SIDES="main new" CHECK_BATCH=1,2,3,4,5,8,64 CHECK_S=170 RUNS=3 BENCH_BATCH=1,2,3,4,5,6,8 \
  BENCH_MODELS="--model qwen3.5-122b-a10b-fp8 --tp 4;--model qwen3.5-122b-a10b --tp 4;--model deepseek-v3 --tp 8" \
  bash bench/scripts/stage_ab.sh > "$OUT/p/ab.txt" 2>&1
timeout 90 .devbin/moetune bench --model qwen3.5-122b-a10b-fp8 --tp 4 --measured-ceilings --batch 1,8,16,32,64,128,256 > "$OUT/p/bars_new.txt" 2>&1
echo "== route_latency main / new"; paste "$OUT/p/route_main.txt" "$OUT/p/route_new.txt" | cut -c1-160
grep -E "^\[  (FAILED|PASSED)|checks on|^FAIL|exit" "$OUT/p/ab.txt" "$OUT/p"/gpu_test_*.txt | grep -v "bench_" | head -20
grep -E "^ +[0-9]+ +[0-9.]+ +\[" "$OUT/p/bars_new.txt"
