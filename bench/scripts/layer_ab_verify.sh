#!/bin/bash
# One device call (about 2-3 minutes): a layer change A/B'd against a base build. Carry .devbin with
#   .devbin/$BASE/moetune                      the build to compare against (default main; "." for
#                                              .devbin/ itself)
#   .devbin/$NEW/{moetune,gpu_test_moe_pdl}    the change (bench/scripts/pdl_build_devbin.sh)
# Steps: NEW's gpu_test_moe_pdl (PDL on/off and GEMM2's top-k sum on/off bit-identical; split-K
# layers on a poisoned workspace); NEW's moetune check at CHECK_BATCH (every stage and the layer
# against the fp64 reference; stage rows print only when they fail); moetune bench A/B at
# BENCH_BATCH on the three anchors (fp8 default model, DeepSeek-V3 with grouped routing, Qwen
# bf16), BASE and NEW interleaved twice. Summary last.
# Used for routing + alignment in one launch (route-align: the defaults below, which straddle its
# bound M <= 4) and GEMM2's top-k sum (fold-topk: BASE=. NEW=fold BENCH_BATCH=1,8,64,256
# CHECK_BATCH=1,8,64,257). About 4 minutes with the check's 200 s limit.
set -uo pipefail
base=${BASE:-main} new=${NEW:-ra}
bench_batch=${BENCH_BATCH:-1,2,4,8,9} check_batch=${CHECK_BATCH:-1,3,4,5,8}
out=/tmp/layer_ab_res; mkdir -p "$out" "${OUT:=$PWD/layer_ab_out}"
export MOETUNE_CACHE_DIR=/tmp/moetune_ra_cache
{ date -u; cat ".devbin/$new/commit.txt" ".devbin/$base/commit.txt"; nvidia-smi -L; } > "$out/env.txt"
step() {  # step NAME SECONDS command...
  local name=$1 secs=$2; shift 2
  local t0=$(date +%s)
  timeout -k 5 "$secs" "$@" >"$out/$name.txt" 2>&1
  echo "$name: exit $? in $(( $(date +%s) - t0 )) s" | tee -a "$out/summary.txt"
}
step test_pdl 60 ".devbin/$new/gpu_test_moe_pdl" --gtest_color=no
step check 200 ".devbin/$new/moetune" check --batch "$check_batch" --configs 1
i=0
for model in "--model qwen3.5-122b-a10b-fp8 --tp 4" "--model deepseek-v3 --tp 8" "--model qwen3.5-122b-a10b --tp 4"; do
  for run in 1 2; do
    for side in "$base" "$new"; do
      # shellcheck disable=SC2086
      step "bench_${i}_${side//[.\/]/base}_$run" 25 ".devbin/$side/moetune" bench $model --batch "$bench_batch"
    done
  done
  i=$((i + 1))
done
tar -czf "$OUT/layer_ab.tgz" -C "$out" .
grep -E "^timing|\[  (FAILED|PASSED) |FAILED" "$out/test_pdl.txt"
echo "check: ok $(grep -c '^ok' "$out/check.txt"), not ok:"; grep -vE "^ok " "$out/check.txt" | tail -n 4
# A check stopped by its timeout prints no "N checks on ..., M failed" line: say so.
grep -qE "^[0-9]+ checks on .*, [0-9]+ failed" "$out/check.txt" || echo "check: NOT FINISHED (no summary line)"
for f in "$out"/bench_*.txt; do echo "=== $(basename "$f")"; tail -n 5 "$f"; done
cat "$out/summary.txt"
