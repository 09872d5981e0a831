#!/bin/bash
# Twenty-ninth session, one device call on either GPU (carry .devbin: `new` = main with the H100
# SXM rules, d3adfa8; `prev` = 5f2d48b, before them). About 4 minutes on an H100, 6 on an H200.
# - On an H100 SXM: `check` at the rules' sizes (M = 96, 128, 256: the s5 up tile and g1 down
#   tile of the new defaults against fp64), then the layer A/B prev against new at M = 64..256 on
#   both fp8 anchors, three interleaved runs. Prediction (call 4's tables): M = 64 unchanged
#   (same tiles), M = 96 -0.8 / -1.2%, M = 128..256 -1.5..-1.6% / -2.1..-2.4% (Qwen3.5 /
#   DeepSeek-V3).
# - On an H200: issue 5's bars at M = 1..256 (`final_bars.sh`; its defaults are 5f2d48b's), then
#   whether the H100's two rules also win there: tables dg1 and dg1s5 of
#   bench/tables/fp8_up_s4_large against the defaults at M = 96, 128, 256, three runs.
#   Prediction: bars as the twenty-fifth session's call 2 within the GPU's spread (Qwen3.5 fp8
#   M = 8 / 16 about 74-75 / 81%); dg1 +0.3..+1.6% at 128/256 (the eleventh session's g32 rule,
#   measured on an H200), dg1s5 unknown.
# Output: $OUT/*.tgz and consoles; a short table last.
set -u
mkdir -p "$OUT"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
echo "gpu: $gpu"; cat .devbin/commit.txt .devbin/prev/commit.txt
T=bench/tables/fp8_up_s4_large
M2="--model qwen3.5-122b-a10b-fp8 --tp 4;--model deepseek-v3 --tp 8"
if [[ "$gpu" == *H200* ]]; then
  OUT=$OUT/bars FLAGS= BENCH_BATCH=1,8,16,32,64,128,256 CHECK_S=150 timeout -k 5 330 \
    bash bench/scripts/final_bars.sh >"$OUT/bars_console.txt" 2>&1
  echo "final_bars: exit $?"; tail -n 40 "$OUT/bars_console.txt"
  OUT=$OUT/ab TESTS=none CHECK_BATCH=none RUNS=3 BENCH_BATCH=96,128,256 BENCH_MODELS="$M2" \
    SIDES="new!measured-ceilings new!measured-ceilings+$T/dg1.json new!measured-ceilings+$T/dg1s5.json" \
    timeout -k 5 200 bash bench/scripts/stage_ab.sh >"$OUT/ab_console.txt" 2>&1
  echo "stage_ab: exit $?"
else
  OUT=$OUT/ab TESTS=none CHECK_BATCH=96,128,256 CHECK_S=120 RUNS=3 BENCH_BATCH=64,96,128,192,256 \
    BENCH_MODELS="$M2" SIDES="prev!measured-ceilings new!measured-ceilings" \
    timeout -k 5 330 bash bench/scripts/stage_ab.sh >"$OUT/ab_console.txt" 2>&1
  echo "stage_ab: exit $?"
  grep -A8 "^check" "$OUT/ab_console.txt" | head -n 10
fi
nvidia-smi --query-gpu=name,uuid,clocks.max.sm,clocks.max.mem --format=csv
