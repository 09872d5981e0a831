#!/bin/bash
# Call 3 (run from the repository root, carry .devbin): the GPU test, then the layer A/B of the
# default against --sliced at 2, 3 and 4 ring slots (MOETUNE_SLICED_STAGES, an environment knob
# of that build, since removed: the layer takes 4).
mkdir -p $OUT; timeout 120 .devbin/gpu_test_moe_sliced --gtest_color=no > $OUT/test_sliced.txt 2>&1; echo "test rc=$?"; grep -E "^(ok|FAIL) |^\[  (PASSED|FAILED)" $OUT/test_sliced.txt | head -30; export MOETUNE_CACHE_DIR=/tmp/moetune-cache; OUT=$OUT/ab TESTS=none CHECK_BATCH=none RUNS=2 BENCH_BATCH=8,16,32,64 BENCH_MODELS="--model qwen3.5-122b-a10b-fp8 --tp 4;--model deepseek-v3 --tp 8" SIDES="new!measured-ceilings new!sliced!measured-ceilings@MOETUNE_SLICED_STAGES=2 new!sliced!measured-ceilings@MOETUNE_SLICED_STAGES=3 new!sliced!measured-ceilings@MOETUNE_SLICED_STAGES=4" timeout -k 5 300 bash bench/scripts/stage_ab.sh > $OUT/ab_console.txt 2>&1; echo "ab rc=$?"; tail -5 $OUT/ab_console.txt
