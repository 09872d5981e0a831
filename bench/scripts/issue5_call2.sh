#!/bin/bash
# Twenty-eighth session, device call 2 (about 4 minutes; carry .devbin, built by issue5_build.sh):
# where --align-in-gemm1 and the 4-stage fused up ring win and lose across M on the fp8 anchors.
# 1. profile (per stage) at M = 8, 12, 16, default and --align-in-gemm1, both fp8 anchors: which
#    stage moves at M = 12, where call 1 lost (+0.8 / +4.5 µs on an H100);
# 2. bench with --measured-ceilings (floor_measured_us: the issue's bar where the GPU is an H200),
#    default / --align-in-gemm1 / the n256s4 table, three interleaved runs, M = 1..256.
# Results: $OUT/ab_call.tgz and $OUT/profile_*.txt.
set -u
mkdir -p "$OUT"
export MOETUNE_CACHE_DIR=/tmp/moetune_call2_cache
i=0
for model in "--model qwen3.5-122b-a10b-fp8 --tp 4" "--model deepseek-v3 --tp 8"; do
  for f in "" "--align-in-gemm1"; do
    # shellcheck disable=SC2086
    timeout 60 .devbin/moetune profile $model $f --batch 8,12,16 >"$OUT/profile_${i}${f:+_align}.txt" 2>&1
    echo "profile $i ${f:-default}: exit $?"
  done
  i=$((i + 1))
done
T=bench/tables/fp8_up_deep_ring
TESTS=none CHECK_BATCH=none RUNS=3 BENCH_BATCH=1,8,12,16,24,32,64,128,256 \
  SIDES="new!measured-ceilings new!align-in-gemm1!measured-ceilings new!measured-ceilings+$T/n256s4.json" \
  BENCH_MODELS="--model qwen3.5-122b-a10b-fp8 --tp 4;--model deepseek-v3 --tp 8" \
  timeout -k 5 "${AB_S:-400}" bash bench/scripts/stage_ab.sh >"$OUT/ab_console.txt" 2>&1
echo "stage_ab: exit $?"
for f in "$OUT"/profile_*.txt; do echo "=== $(basename "$f")"; grep -E "^M=|gemm|align|act|routing" "$f"; done
