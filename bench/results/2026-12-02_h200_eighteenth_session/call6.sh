# Call 6: the final version (v5: moe_decode_down takes UP_BULK, the up kernel's path at that M:
# beside the bulk path (M = 1) the weights before its w2 preloads and the routing's outputs
# written after the wait (v3), beside the register path (M >= 2) the weights after the preloads
# (v4)) against main: GPU tests, check at the decode sizes, layer A/B, Qwen3.5 fp8 bars.
set -u
mkdir -p "$OUT/p"
{ date -u; nvidia-smi -L; cat .devbin/commit.txt .devbin/main/commit.txt; } > "$OUT/p/env.txt"
.devbin/test_cuda_device --gtest_color=no > "$OUT/p/test_device.txt" 2>&1; echo "test_cuda_device rc $?"
OUT=$OUT/a SIDES="main new" CHECK_BATCH=1,2,3,4,5,8 CHECK_S=170 RUNS=3 BENCH_BATCH=1,2,3,4,5,8 \
  BENCH_MODELS="--model qwen3.5-122b-a10b-fp8 --tp 4;--model qwen3.5-122b-a10b --tp 4;--model deepseek-v3 --tp 8" \
  bash bench/scripts/stage_ab.sh > "$OUT/p/ab.txt" 2>&1
timeout 90 .devbin/moetune bench --model qwen3.5-122b-a10b-fp8 --tp 4 --measured-ceilings --batch 1,8,16,32,64,128,256 > "$OUT/p/bars_new.txt" 2>&1
grep -E "^\[  (FAILED|PASSED)|checks on|^FAIL|exit" "$OUT/p/ab.txt" | grep -v "bench_" | head -20
grep -E "^ +[0-9]+ +[0-9.]+ +\[" "$OUT/p/bars_new.txt"
