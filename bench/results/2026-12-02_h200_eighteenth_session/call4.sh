# Call 4: the harness fix (DeviceBuffer's synchronous fills and uploads wait for the legacy
# stream) shown by its test failing without it; the third routing version (selection on the
# logits; the weights as before; moe_decode_up's bulk path routes the ids only and
# moe_decode_down writes the routing's outputs there; every decode kernel's registers as main's
# but the bulk up kernels') against main.
set -u
mkdir -p "$OUT/p"
{ date -u; nvidia-smi -L; cat .devbin/commit.txt .devbin/main/commit.txt; } > "$OUT/p/env.txt"
.devbin/test_cuda_device_nofix --gtest_color=no --gtest_filter='*Synchronous*' > "$OUT/p/test_device_nofix.txt" 2>&1
echo "nofix: rc $?"; grep -E "Failure|Expected|Which is|round|^\[  (PASSED|FAILED)" "$OUT/p/test_device_nofix.txt" | head -8
.devbin/test_cuda_device --gtest_color=no > "$OUT/p/test_device.txt" 2>&1
echo "fixed: rc $?"; grep -E "^\[  (PASSED|FAILED)" "$OUT/p/test_device.txt"
.devbin/route_latency_prev > "$OUT/p/route_prev.txt" 2>&1
.devbin/route_latency > "$OUT/p/route_new.txt" 2>&1
OUT=$OUT/a SIDES="main new" CHECK_BATCH=1,3,4,8 CHECK_S=200 RUNS=3 BENCH_BATCH=1,2,3,4,5,8 \
  BENCH_MODELS="--model qwen3.5-122b-a10b-fp8 --tp 4;--model qwen3.5-122b-a10b --tp 4;--model deepseek-v3 --tp 8" \
  bash bench/scripts/stage_ab.sh > "$OUT/p/ab.txt" 2>&1
for side in main .; do
  timeout 60 .devbin/$side/moetune bench --model qwen3.5-122b-a10b-fp8 --tp 4 --measured-ceilings --batch 1 > "$OUT/p/bars_${side/./new}.txt" 2>&1
done
echo "== route_latency prev / new"; paste "$OUT/p/route_prev.txt" "$OUT/p/route_new.txt" | cut -c1-150
grep -E "^\[  (FAILED|PASSED)|checks on|^FAIL|exit" "$OUT/p/ab.txt" | grep -v "bench_" | head -20
for side in main new; do grep -E "^ +1 +[0-9.]+ +\[" "$OUT/p/bars_$side.txt"; done
