# Call 5: the persistent kernel's timeline at ring depths 3, 4, 5 (call 4: at 6, some units
# waited 9-14 µs from issue to arrival; fewer copies outstanding may serve every block evenly).
set -u
export MOETUNE_CACHE_DIR=/tmp/call5_cache
{ date -u; nvidia-smi --query-gpu=name,uuid --format=csv; cat .devbin/commit.txt; }
timeout -k 5 150 .devbin/gpu_test_moe_persistent --gtest_color=no --gtest_filter='*TimelineByRingDepth*' > $OUT/test.txt 2>&1
echo "test rc $?"; grep -E "M=|GEMM1 done|consumers done" $OUT/test.txt
