# Call 2: exp/decode-cf2 (the amax redux, and the fp8 bulk path's quantization after its weight
# copies with the loads and scales before the barrier) as `new`, against main (c835756) and amax
# (ac29487): GPU tests and check at M = 1, 2 for new, the M = 1 timelines of amax and cf2, a
# layer A/B (Qwen3.5 fp8 M = 1..4, 8; DeepSeek-V3 M = 1, 2), then issue 5's bars with new.
set -u
mkdir -p "$OUT/p"
{ date -u; nvidia-smi -L; for d in main amax; do echo "$d: $(cat .devbin/$d/commit.txt)"; done;
  echo "new: $(cat .devbin/commit.txt)"; } > "$OUT/p/env.txt"
cat "$OUT/p/env.txt"
for s in cf2 amax; do
  timeout 120 stdbuf -oL .devbin/decode_probe_$s "$OUT/p/probe_log_$s.txt" > "$OUT/p/probe_$s.txt" 2>&1
  echo "probe $s rc $?"
done
gzip -f "$OUT"/p/probe_log_*.txt
grep -q "identical (0 bad)" "$OUT/p/probe_cf2.txt" || { echo "cf2 probe check failed"; exit 1; }
OUT=$OUT/a SIDES="main amax new" CHECK_BATCH=1,2 CHECK_S=60 RUNS=3 BENCH_BATCH=1,2,3,4,8 \
  BENCH_MODELS="--model qwen3.5-122b-a10b-fp8 --tp 4;--model deepseek-v3 --tp 8" \
  bash bench/scripts/stage_ab.sh > "$OUT/p/ab.txt" 2>&1
grep -E "^\[  (FAILED|PASSED)|^check|exit [^0]" "$OUT/p/ab.txt" | head -20
OUT=$OUT/bars BENCH_BATCH=1,8,16,32,64,128,256 CHECK_S=1 bash bench/scripts/final_bars.sh > "$OUT/p/bars.txt" 2>&1
grep -E "^ +[0-9]+ +[0-9.]+ +\[|rc=" "$OUT/p/bars.txt"
for s in amax cf2; do echo "== probe $s"; grep -E "M=1 cold|timeline bulk p2 M=1 cold" -A 15 "$OUT/p/probe_$s.txt" | grep -E "bulk p2|up |down |next" | head -18; done
