#!/bin/bash
# Twenty-eighth session, device call 3 (about 3 minutes; carry .devbin): the fused up ring at
# M = 48..256 (bench/tables/fp8_up_s4_large: only the up stages change) against the defaults,
# three interleaved runs, both fp8 anchors, --measured-ceilings (on an H200 the default side is
# also issue 5's bars at M = 1..256). Results: $OUT/ab_call.tgz, $OUT/ab_console.txt.
set -u
mkdir -p "$OUT"
T=bench/tables/fp8_up_s4_large
TESTS=none CHECK_BATCH=none RUNS=3 BENCH_BATCH=1,8,16,32,48,64,96,128,192,256 \
  SIDES="new!measured-ceilings new!measured-ceilings+$T/s4.json new!measured-ceilings+$T/s5.json" \
  BENCH_MODELS="--model qwen3.5-122b-a10b-fp8 --tp 4;--model deepseek-v3 --tp 8" \
  timeout -k 5 "${AB_S:-400}" bash bench/scripts/stage_ab.sh >"$OUT/ab_console.txt" 2>&1
echo "stage_ab: exit $?"
nvidia-smi --query-gpu=name,uuid,clocks.max.sm,clocks.max.mem --format=csv
