#!/bin/bash
# Twenty-eighth session, device call 4 (about 3 minutes; carry .devbin): GEMM2's GROUP_SIZE_M at
# M = 128..256 now that GEMM2 adds the top-k sum with atomics (bench/tables/fp8_up_s4_large/dg*),
# each side also with --deterministic (the separate sum the g32 rule was measured with), three
# interleaved runs, both fp8 anchors. Results: $OUT/ab_call.tgz, $OUT/ab_console.txt.
set -u
mkdir -p "$OUT"
T=bench/tables/fp8_up_s4_large
TESTS=none CHECK_BATCH=none RUNS=3 BENCH_BATCH=96,128,192,256 \
  SIDES="new!measured-ceilings new!measured-ceilings+$T/dg1.json new!measured-ceilings+$T/dg8.json new!measured-ceilings+$T/dg1s5.json new!deterministic new!deterministic+$T/dg1.json" \
  BENCH_MODELS="--model qwen3.5-122b-a10b-fp8 --tp 4;--model deepseek-v3 --tp 8" \
  timeout -k 5 "${AB_S:-400}" bash bench/scripts/stage_ab.sh >"$OUT/ab_console.txt" 2>&1
echo "stage_ab: exit $?"
nvidia-smi --query-gpu=name,uuid,clocks.max.sm,clocks.max.mem --format=csv
