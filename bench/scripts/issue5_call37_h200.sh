#!/bin/bash
# Thirty-seventh session, one call on an H200 (carry .devbin from pdl_build_devbin.sh at 15576cd
# or later, plus .devbin/ring_copy built from bench/scripts/decode_probe/ring_copy.cu).
# 1. ring_copy RING_COPY_DEEP=1: does `pair` (the producer waits for two free slots and copies
#    two 128-deep K-tiles row by row together) copy as fast as d2 (128 rows x 256 bytes)?
#    Prediction: within a point of d2, 3-5% under the 256 x 128-byte units.
# 1b. steal_copy (build as its header says): the sliced kernel's copies with GEMM2 units taken by
#    blocks that finished early. Prediction: -3..-5% at 57 experts (ends spread ~6 µs, a third of
#    the bytes movable), less at 101.
# 2. issue5_call_sliced_default_h200.sh: tests, check, profile, bars, A/B defaults / --no-sliced.
#    Prediction: Qwen3.5 fp8 M = 8 about 39.4 µs (81% of floor_measured), 19 of 21 bars.
set -u
FINAL=$OUT; OUT=$OUT/w; mkdir -p "$OUT"; export OUT
nvidia-smi --query-gpu=name,uuid,clocks.max.sm --format=csv,noheader
RING_COPY_DEEP=1 timeout 40 .devbin/ring_copy >"$OUT/ring_copy_deep.txt" 2>&1
echo "ring_copy rc=$?"; cut -c1-120 "$OUT/ring_copy_deep.txt" | head -n 30
timeout 40 .devbin/steal_copy >"$OUT/steal_copy.txt" 2>&1
echo "steal_copy rc=$?"; cut -c1-200 "$OUT/steal_copy.txt"
CALL_S=$((${CALL_S:-330} - SECONDS)) bash bench/scripts/issue5_call_sliced_default_h200.sh
tar czf "$FINAL/call.tgz" -C "$FINAL" w && rm -rf "$FINAL/w"
