#!/bin/bash
# Twenty-ninth session, device call 3 (an H100 SXM; carry .devbin at d3adfa8): the fused n256 up
# tile inside the band of block_fp8_fused_act_up, with and without --align-in-gemm1, on both fp8
# anchors at M = 12..32 (bench/tables/fp8_up_fused_band), three interleaved runs.
# Prediction (call 2: the tuned tables at M = 16 -1.9% / -2.0%, with align -3.2% / -2.5%): f3 or
# f4 -1.5..-2.5% at M = 12..20 where the default is n128 unfused, within +-1% at 24..32 (the
# default is n256 s2 there); --align-in-gemm1 a further -0.7..-1.3% wherever the up tile is
# the fused one. Output: $OUT/ab_call.tgz, $OUT/ab_console.txt.
set -u
mkdir -p "$OUT"
T=bench/tables/fp8_up_fused_band
TESTS=none CHECK_BATCH=none RUNS=3 BENCH_BATCH=12,16,20,24,28,32 \
  BENCH_MODELS="--model qwen3.5-122b-a10b-fp8 --tp 4;--model deepseek-v3 --tp 8" \
  SIDES="new!measured-ceilings new!measured-ceilings+$T/f3.json new!measured-ceilings+$T/f4.json new!align-in-gemm1!measured-ceilings new!align-in-gemm1!measured-ceilings+$T/f3.json new!align-in-gemm1!measured-ceilings+$T/f4.json" \
  timeout -k 5 400 bash bench/scripts/stage_ab.sh >"$OUT/ab_console.txt" 2>&1
echo "stage_ab: exit $?"
nvidia-smi --query-gpu=name,uuid --format=csv,noheader
