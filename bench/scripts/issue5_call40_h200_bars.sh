#!/bin/bash
# Issue 5's bars on an H200 only, in a short call (little device time left): on any other GPU it
# stops at once. Carry .devbin (`moetune` at main, 15d4ef2 or later). Predictions as
# issue5_call40.sh's part 1. Then, if time is left, the defaults against --no-sliced at M = 14
# and 16 (the H200's second-wave band, predicted from the H100), one run a side.
# Env: CALL_S (the command's seconds, default 200).
set -u
left() { local l=$((${CALL_S:-200} - 10 - SECONDS)); [ "$l" -lt 5 ] && l=5; echo "$l"; }
FINAL=$OUT; OUT=$FINAL/w; mkdir -p "$OUT"
export MOETUNE_CACHE_DIR=/tmp/moetune-cache
nvidia-smi --query-gpu=name,uuid,clocks.max.sm --format=csv,noheader
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200"; exit 0; }
cat .devbin/commit.txt
mkdir -p "$OUT/bars"
OUT=$OUT/bars BENCH_BATCH=1,8,16,32,64,128,256 CHECK_S=15 \
  timeout -k 5 "$(left)" bash bench/scripts/final_bars.sh >"$OUT/bars_console.txt" 2>&1
echo "final_bars: exit $?"
grep -E "^ +(1|8|16|32|64|128|256) |rc=" "$OUT/bars_console.txt"
for m in "--model qwen3.5-122b-a10b-fp8 --tp 4" "--model deepseek-v3 --tp 8"; do
  for side in "" --no-sliced; do
    [ "$(left)" -lt 15 ] && break 2
    # shellcheck disable=SC2086
    timeout "$(left)" .devbin/moetune bench $m $side --measured-ceilings --batch 14,16 \
      >"$OUT/ab_${m##* }${side}.txt" 2>&1
    echo "$m ${side:-default}: $(grep -E '^ +1[46] ' "$OUT/ab_${m##* }${side}.txt" |
      awk '{printf "%s %s; ", $1, $2}')"
  done
done
tar czf "$FINAL/call.tgz" -C "$FINAL" w && rm -rf "$FINAL/w"
