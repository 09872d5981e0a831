# Call 5: v4 (call 4's v3 plus: moe_decode_down, where block fp8 caps it at 64 registers, routes
# the ids only before its w2 preloads and computes the weights after issuing them) against main
# and v3; the M = 1 bar and M = 8, 16 with v4.
set -u
mkdir -p "$OUT/p"
{ date -u; nvidia-smi -L; cat .devbin/commit.txt .devbin/main/commit.txt; } > "$OUT/p/env.txt"
OUT=$OUT/a SIDES="main v3 new" CHECK_BATCH=1,2,3,4 CHECK_S=150 RUNS=3 BENCH_BATCH=1,2,3,4,5 \
  BENCH_MODELS="--model qwen3.5-122b-a10b-fp8 --tp 4;--model qwen3.5-122b-a10b --tp 4" \
  bash bench/scripts/stage_ab.sh > "$OUT/p/ab.txt" 2>&1
for side in main .; do
  timeout 60 .devbin/$side/moetune bench --model qwen3.5-122b-a10b-fp8 --tp 4 --measured-ceilings --batch 1,8,16 > "$OUT/p/bars_${side/./new}.txt" 2>&1
done
timeout 100 .devbin/decode_probe "$OUT/p/probe_log.txt" > "$OUT/p/probe.txt" 2>&1; gzip -9 "$OUT/p/probe_log.txt"
grep -E "^\[  (FAILED|PASSED)|checks on|^FAIL|exit" "$OUT/p/ab.txt" | grep -v "bench_" | head -20
for side in main new; do echo "== $side"; grep -E "^ +[0-9]+ +[0-9.]+ +\[" "$OUT/p/bars_$side.txt"; done
grep -E "cold  median" "$OUT/p/probe.txt" | head -3
