#!/bin/bash
# Issue 5's second call of the forty-first session. Carry .devbin: `moetune` built at main
# (96ffd84: 2137ce0's kernels and defaults; the ROUTE instance reverted).
# On an H200:
#   1. issue 5's bars at the defaults (final_bars.sh). Prediction: Qwen3.5 fp8 M = 8 about
#      38.5 µs (83% of floor_measured), M = 16 about 68.8 µs (83%, the sliced kernel now), the
#      rest as the thirty-fifth session's (19 of 21 then).
#   2. the ring depth, --sliced-stages 3 / 4 / 5 at M = 8, 16 on both fp8 anchors, two
#      interleaved runs (H100 in the thirty-third session: 3 and 5 lost by 1..2% at M = 8).
#      Prediction: 5 slots -0..-2% at M = 8 (more bytes in flight for 4.8 TB/s).
#   3. the defaults against --no-sliced at M = 14, 16, 20 (the H200's second-wave band,
#      predicted from the H100): the defaults -1..-3% at 14 / 16, -4..-6% at 20.
# On an H100: 2 and 3 only, at M = 6, 8, 16, 20 (2) and 14, 16, 20 (3), two runs (call 1 of this
# session had 3 slots -1.0% at M = 8 on both anchors in one run, with the ROUTE instance).
# RING_BATCH overrides the H100's ring sizes (the forty-first session's call 2 ran the default;
# RING_BATCH=6,8,14,16,20,22,24 adds the sizes that decide a depth by waves on the H100 SXM).
# Env: CALL_S (the command's seconds, default 300).
set -u
. "$(dirname "${BASH_SOURCE[0]}")/device_call_lib.sh" || exit 1
budget_call 300
ring_batch=${RING_BATCH:-6,8,16,20}
if echo "$gpu" | grep -q H200; then
  ring_batch=8,16
  bars 200 30
fi
anchor_ab ring 120 "$ring_batch" "$ring_sides"
anchor_ab band 100 14,16,20 "new!measured-ceilings new!no-sliced!measured-ceilings"
budget_done
