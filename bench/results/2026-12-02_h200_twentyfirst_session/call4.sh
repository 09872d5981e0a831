# Call 4: the per-unit timeline of three blocks (first, median, last to end GEMM1): when the
# producer began each unit's copies and when the consumers had its data (call 3: GEMM1 ends
# between 25.9 and 40.3 µs over the blocks, 1.46 µs a unit at the median).
set -u
export MOETUNE_CACHE_DIR=/tmp/call4_cache
{ date -u; nvidia-smi --query-gpu=name,uuid --format=csv; cat .devbin/commit.txt; }
timeout -k 5 100 .devbin/gpu_test_moe_persistent --gtest_color=no --gtest_filter='*Timeline*' > $OUT/test.txt 2>&1
echo "test rc $?"; grep -vE "^\[" $OUT/test.txt | cut -c1-1500
