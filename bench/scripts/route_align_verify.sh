#!/bin/bash
# One device call (about 2 minutes) for routing + alignment in one launch at decode sizes
# (kernels/moe_route_align.cuh; routing_fuses_align: M <= 4, M*topk <= 512). Carry .devbin with
#   .devbin/$BASE/moetune                      the build to compare against (default main)
#   .devbin/$NEW/{moetune,gpu_test_moe_pdl}    this branch (bench/scripts/pdl_build_devbin.sh)
# Steps: gpu_test_moe_pdl (PDL on/off bit-identical; a split-K layer on a poisoned workspace at
# M = 64, 1, 4, 5, 8: the fused kernel must zero the counters as the alignment does); moetune check on
# both sides of the bound (every stage and the layer against the fp64 reference; stage rows
# print only when they fail); bench A/B at M = 1, 2, 4, 8, 9 (fp8 default model, DeepSeek-V3
# with grouped routing, Qwen bf16), BASE and NEW interleaved twice. Summary last.
set -uo pipefail
base=${BASE:-main} new=${NEW:-ra}
out=/tmp/route_align_res; mkdir -p "$out" "${OUT:=$PWD/route_align_out}"
export MOETUNE_CACHE_DIR=/tmp/moetune_ra_cache
{ date -u; cat ".devbin/$new/commit.txt" ".devbin/$base/commit.txt"; nvidia-smi -L; } > "$out/env.txt"
step() {  # step NAME SECONDS command...
  local name=$1 secs=$2; shift 2
  local t0=$(date +%s)
  timeout -k 5 "$secs" "$@" >"$out/$name.txt" 2>&1
  echo "$name: exit $? in $(( $(date +%s) - t0 )) s" | tee -a "$out/summary.txt"
}
step test_pdl 60 ".devbin/$new/gpu_test_moe_pdl" --gtest_color=no
step check 75 ".devbin/$new/moetune" check --batch 1,3,4,5,8 --configs 1
i=0
for model in "--model qwen3.5-122b-a10b-fp8 --tp 4" "--model deepseek-v3 --tp 8" "--model qwen3.5-122b-a10b --tp 4"; do
  for run in 1 2; do
    for side in "$base" "$new"; do
      # shellcheck disable=SC2086
      step "bench_${i}_${side}_$run" 25 ".devbin/$side/moetune" bench $model --batch 1,2,4,8,9
    done
  done
  i=$((i + 1))
done
tar -czf "$OUT/route_align.tgz" -C "$out" .
grep -E "^timing|\[  (FAILED|PASSED) |FAILED" "$out/test_pdl.txt"
echo "check: ok $(grep -c '^ok' "$out/check.txt"), not ok:"; grep -vE "^ok " "$out/check.txt" | tail -n 4
for f in "$out"/bench_*.txt; do echo "=== $(basename "$f")"; tail -n 5 "$f"; done
cat "$out/summary.txt"
