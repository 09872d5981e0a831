# Call 5: call 3's change with the ballot out of an && operand (call 4: the lanes whose head was
# not the max skipped __ballot_sync: illegal instruction in the routing kernel, hangs in the
# probes), against main 03bf3b1: the probes, GPU tests, check, layer A/B (a short one: the
# session's last device time).
set -u
mkdir -p "$OUT/p"
{ date -u; nvidia-smi -L; cat .devbin/commit.txt .devbin/main/commit.txt; } > "$OUT/p/env.txt"
timeout 15 stdbuf -oL .devbin/route_latency > "$OUT/p/route_new.txt" 2>&1; r1=$?
timeout 15 stdbuf -oL .devbin/route_picks > "$OUT/p/route_picks.txt" 2>&1; r2=$?
echo "route_latency rc $r1, route_picks rc $r2"; cat "$OUT/p/route_new.txt" "$OUT/p/route_picks.txt"
[ $r1 -eq 0 ] && [ $r2 -eq 0 ] || exit 1  # a hang would burn the tests' timeouts
OUT=$OUT/a SIDES="main new" CHECK_BATCH=1,2,4,8 CHECK_S=80 RUNS=2 BENCH_BATCH=1,2,3,4,8 \
  BENCH_MODELS="--model qwen3.5-122b-a10b-fp8 --tp 4;--model qwen3.5-122b-a10b --tp 4;--model deepseek-v3 --tp 8" \
  bash bench/scripts/stage_ab.sh > "$OUT/p/ab.txt" 2>&1
grep -E "^\[  (FAILED|PASSED)|checks on|^FAIL|exit|tied rows" "$OUT/p/ab.txt" | grep -v "bench_" | head -20
