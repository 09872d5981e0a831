#!/bin/bash
# One device call (about 4 minutes): the decode kernels (kernels/moe_decode.cuh, M <= 4) checked
# and A/B'd against the stage kernels in the same binary (--no-decode-kernels). Carry .devbin
# with moetune and gpu_test_moe_pdl (bench/scripts/pdl_build_devbin.sh).
# Steps: gpu_test_moe_pdl (PDL on/off bit-identical, graph replays, NaN router rows at M = 4);
# gpu_test_moe_decode when built (decode against stage kernels at EP rank 1, precomputed ids);
# moetune check at CHECK_BATCH (the layer against the fp64 reference, the decode kernels' routing
# against the routing stage's, every stage kernel); moetune bench at BENCH_BATCH on the three
# anchors, decode kernels on and off (and variant builds named in SIDES) interleaved twice.
# CHECK_BIN: the binary the check runs (default .devbin/moetune; e.g. a variant build's).
# BENCH_S: seconds per bench run (default 30; a variant build compiles its kernels in its first).
# Summary last.
set -uo pipefail
bench_batch=${BENCH_BATCH:-1,2,4,8} check_batch=${CHECK_BATCH:-1,2,3,4,5}
out=/tmp/decode_ab_res; mkdir -p "$out" "${OUT:=$PWD/decode_ab_out}"
export MOETUNE_CACHE_DIR=/tmp/moetune_decode_cache
{ date -u; cat .devbin/commit.txt; nvidia-smi -L; } > "$out/env.txt"
step() {  # step NAME SECONDS command...
  local name=$1 secs=$2; shift 2
  local t0=$(date +%s)
  timeout -k 5 "$secs" "$@" >"$out/$name.txt" 2>&1
  echo "$name: exit $? in $(( $(date +%s) - t0 )) s" | tee -a "$out/summary.txt"
}
step test_pdl 90 .devbin/gpu_test_moe_pdl --gtest_color=no
[ -x .devbin/gpu_test_moe_decode ] && step test_decode 120 .devbin/gpu_test_moe_decode --gtest_color=no
step check "${CHECK_S:-200}" "${CHECK_BIN:-.devbin/moetune}" check --batch "$check_batch" --configs 1 --variants bf16,fp8_block
i=0
for model in "--model qwen3.5-122b-a10b-fp8 --tp 4" "--model deepseek-v3 --tp 8" "--model qwen3.5-122b-a10b --tp 4"; do
  for run in 1 2; do
    for side in ${SIDES:-stage decode}; do
      # stage: the stage kernels (--no-decode-kernels); decode: .devbin/moetune's default; any
      # other name: .devbin/NAME/moetune's default (a variant build).
      bin=.devbin/moetune flag=""
      case $side in
        stage) flag="--no-decode-kernels" ;;
        decode) ;;
        *) bin=.devbin/$side/moetune ;;
      esac
      # shellcheck disable=SC2086
      step "bench_${i}_${side}_$run" "${BENCH_S:-30}" "$bin" bench $model --batch "$bench_batch" $flag
    done
  done
  i=$((i + 1))
done
tar -czf "$OUT/decode_ab.tgz" -C "$out" .
grep -E "^timing|\[  (FAILED|PASSED) |FAILED" "$out/test_pdl.txt"
[ -f "$out/test_decode.txt" ] && grep -E "rel\. error|\[  (FAILED|PASSED) |Failure" "$out/test_decode.txt"
echo "check: ok $(grep -c '^ok' "$out/check.txt"), not ok:"; grep -vE "^ok " "$out/check.txt" | tail -n 8
grep -qE "^[0-9]+ checks on .*, [0-9]+ failed" "$out/check.txt" || echo "check: NOT FINISHED (no summary line)"
for f in "$out"/bench_*.txt; do echo "=== $(basename "$f")"; tail -n 6 "$f"; done
cat "$out/summary.txt"
