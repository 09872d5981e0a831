#!/bin/bash
# Thirty-seventh session, one call on whichever GPU comes (carry .devbin): the probe call
# (issue5_call37_probes.sh: steal_copy, ring_copy pair, the sliced test and check, the
# pair-producer build's check and A/B), then on an H200 issue 5's bar table at main's defaults
# (final_bars.sh). Prediction for the bars: Qwen3.5 fp8 M = 8 about 39.4 µs (81% of
# floor_measured; 0a7c4fd), the rest as the thirty-fifth session's call 1: 19 of 21.
set -u
FINAL=$OUT
OUT=$FINAL/probes; mkdir -p "$OUT"
OUT=$OUT bash bench/scripts/issue5_call37_probes.sh
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  left=$((${CALL_S:-500} - 15 - SECONDS)); [ "$left" -gt 200 ] && left=200
  mkdir -p "$FINAL/bars"
  export MOETUNE_CACHE_DIR=/tmp/moetune-cache
  OUT=$FINAL/bars FLAGS= BENCH_BATCH=1,8,16,32,64,128,256 CHECK_S=20 \
    timeout -k 5 "$left" bash bench/scripts/final_bars.sh >"$FINAL/bars/bars_console.txt" 2>&1
  echo "final_bars: exit $? (limit $left s)"
  grep -E "^ +(1|8|16|32|64|128|256) |rc=" "$FINAL/bars/bars_console.txt"
  tar czf "$FINAL/bars.tgz" -C "$FINAL" bars && rm -rf "$FINAL/bars"
fi
