#!/bin/bash
# Issue 5's next call (fortieth session). Carry .devbin: `moetune` built at main (15d4ef2 or
# later: the routing zeroes out for the sliced kernel, and the kernel is the default also where
# its blocks fill most of a second wave, M = 14..20 on the H200's anchors). Whichever GPU comes:
# 1. issue 5's bars at the defaults (final_bars.sh) and a profile at Qwen3.5 fp8
#    M = 8. Prediction: Qwen3.5 fp8 M = 8 about 38.5 µs (83% of floor_measured), M = 16 about
#    68.8 µs (83%; the sliced kernel now), the rest as the thirty-fifth session's.
# 2. the defaults against --no-sliced at M = 12, 14, 16, 20, 22 on both fp8 anchors, two
#    interleaved runs: on the H200 the rule's second-wave band (14..20) is predicted from the
#    H100 (there M = 14..24 won by 0.1..4.6%), M = 20 measured before (-3.2 / -3.4%). Prediction:
#    the defaults -1..-3% at M = 14, 16, -4..-6% at 20; equal at 12 and 22 (stage path both
#    sides). If M = 14 or 16 loses beyond the spread, the H200's band starts at 20 (1.94 waves).
# 2b. the sliced kernel's ring depth on this GPU (--sliced-stages, default 4: measured on an H100
#    only, where 3 and 5 lost by 1..2% at M = 8): 3 / 4 / 5 slots at M = 8, 16 on both fp8
#    anchors, two interleaved runs. Prediction on an H200 (more bytes in flight per SM to reach
#    its 4.8 TB/s): 5 slots -0..-2% at M = 8, within the spread at 16; on an H100 as before.
#    If 5 wins beyond the spread on both anchors, make it the H200's depth (FusedMoe's
#    constructor, moe::sliced_stages).
# 3. the sliced row's error against fp64 (`check --verbose`, Qwen3.5 fp8 M = 6..8, seeds 1..6)
#    next to the stage path's rows (--no-sliced), if time is left.
# Env: CALL_S (the command's seconds, default 480; 300 drops most of 3).
set -u
. "$(dirname "${BASH_SOURCE[0]}")/device_call_lib.sh" || exit 1
budget_call 480
{  # the bars on either GPU (on an H100 SXM: the table at the new defaults, 21 of 21 before)
  bars 220 40
  timeout "$(cap 30)" .devbin/moetune profile --model qwen3.5-122b-a10b-fp8 --tp 4 --batch 8 \
    --measured-ceilings >"$OUT/profile_m8.txt" 2>&1
  echo "profile rc=$?"; tail -n 12 "$OUT/profile_m8.txt"
}
anchor_ab ab 150 12,14,16,20,22 "new!measured-ceilings new!no-sliced!measured-ceilings"
anchor_ab ring 100 8,16 "$ring_sides"
for st in 3 5; do  # the other depths against fp64 (the default's is checked in part 1's bars)
  [ "$(left)" -lt 20 ] && break
  timeout "$(cap 25)" .devbin/moetune check --model qwen3.5-122b-a10b-fp8 --tp 4 --batch 8,16 \
    --configs 1 --sliced-stages $st >"$OUT/check_s$st.txt" 2>&1
  echo "check --sliced-stages $st rc=$?: $(tail -n 1 "$OUT/check_s$st.txt")"
done
for seed in 1 2 3 4 5 6; do
  for side in "" --no-sliced; do
    [ "$(left)" -lt 12 ] && break 2
    # shellcheck disable=SC2086
    timeout "$(cap 20)" .devbin/moetune check --model qwen3.5-122b-a10b-fp8 --tp 4 --batch 6,7,8 \
      --configs 1 --seed $seed --verbose $side >"$OUT/err_${seed}${side}.txt" 2>&1
    echo "seed $seed ${side:-sliced}: $(grep -E "reduce|quant " "$OUT/err_${seed}${side}.txt" |
      sed -E 's/.*M=([0-9]+) +([a-z0-9+_]+) +error ([0-9.e+-]+).*/\1 \2 \3/' | tr '\n' ';')"
  done
done
budget_done
