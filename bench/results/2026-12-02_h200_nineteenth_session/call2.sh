# Call 2: route_picks probe (bench/scripts/decode_probe/route_picks.cu): where route_token's
# ids-only top-8 cycles go and what other pick loops cost, with their agreement with main.
set -u
mkdir -p "$OUT/p"
{ date -u; nvidia-smi -L; git log -1 --format=%H; } > "$OUT/p/env.txt"
.devbin/route_picks 2>&1 | tee "$OUT/p/route_picks.txt"
