# Call 4: call 3 hung in the new route_latency (no output in 600 s). Which kernels hang: each
# binary under a timeout, stdout line-buffered.
set -u
mkdir -p "$OUT/p"
{ date -u; nvidia-smi -L; cat .devbin/commit.txt; } > "$OUT/p/env.txt"
timeout 12 stdbuf -oL .devbin/route_latency > "$OUT/p/route_new.txt" 2>&1; echo "route_latency rc $?"
timeout 12 stdbuf -oL .devbin/route_picks > "$OUT/p/route_picks.txt" 2>&1; echo "route_picks rc $?"
timeout 25 .devbin/gpu_test_moe_stages --gtest_color=no > "$OUT/p/stages.txt" 2>&1; echo "stages rc $?"
timeout 20 .devbin/gpu_test_moe_decode --gtest_color=no > "$OUT/p/decode.txt" 2>&1; echo "decode rc $?"
cat "$OUT/p/route_new.txt" "$OUT/p/route_picks.txt"; grep -E "^\[ +(OK|FAILED|RUN) |tied" "$OUT/p/stages.txt" "$OUT/p/decode.txt" | tail -12
