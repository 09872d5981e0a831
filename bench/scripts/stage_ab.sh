#!/bin/bash
# Device call (carry .devbin; run from the repository root): correctness, then a layer A/B of
# builds and environment settings.
#   1. gpu_test_gemm_mma (GEMM_FILTER, default all), gpu_test_moe_topk_sum, _stages, _pdl,
#      _decode and _align_in_gemm1 where .devbin has them (TESTS=none skips them);
#   2. `moetune check` at CHECK_BATCH (default 8,64,257; `none` skips it) on the anchors,
#      fp8_block and bf16;
#   3. `moetune bench` of every side in SIDES at BENCH_BATCH on each of BENCH_MODELS
#      (';'-separated), interleaved RUNS times. A side is NAME[!FLAG][@VAR=VALUE][+TABLE]: NAME
#      `new` is .devbin/moetune, any other .devbin/NAME/moetune; FLAG is passed as --FLAG (e.g.
#      new!no-pdl; several: new!align-in-gemm1!deterministic); VAR=VALUE is set for that run
#      only; TABLE (a config table's path, its _down.json beside it) is passed as --config.
# Everything lands in $OUT/ab_call.tgz; a summary is printed last.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/device_call_lib.sh" || exit 1
call_setup ab_call
if [ "${TESTS:-all}" != none ]; then
  [ -x .devbin/gpu_test_gemm_mma ] &&
    step gemm_mma 300 .devbin/gpu_test_gemm_mma --gtest_color=no --gtest_filter="${GEMM_FILTER:-*}"
  for t in gpu_test_moe_topk_sum gpu_test_moe_stages gpu_test_moe_pdl gpu_test_moe_decode \
    gpu_test_moe_align_in_gemm1; do
    [ -x ".devbin/$t" ] && step "$t" 150 ".devbin/$t" --gtest_color=no
  done
fi
[ "${CHECK_BATCH:-8,64,257}" != none ] &&
  step check "${CHECK_S:-240}" .devbin/moetune check --batch "${CHECK_BATCH:-8,64,257}" \
    --configs 2 --variants bf16,fp8_block
IFS=';' read -ra models <<<"${BENCH_MODELS:---model qwen3.5-122b-a10b-fp8 --tp 4}"
i=0
for model in "${models[@]}"; do
  for run in $(seq "${RUNS:-2}"); do
    for side in ${SIDES:-prev new}; do
      cfg=; [ "${side#*+}" != "$side" ] && cfg="--config ${side#*+}"
      base=${side%%+*}
      name=${base%%@*}; var=; [ "$base" != "$name" ] && var=${base#*@}
      flag=; [ "${name#*!}" != "$name" ] && flag="--${name#*!}" && flag=${flag//!/ --} &&
        name=${name%%!*}
      bin=.devbin/$name/moetune; [ "$name" = new ] && bin=.devbin/moetune
      tag=$(echo "$side" | tr '@=+/!' '_____')
      # shellcheck disable=SC2086
      step "bench_${i}_${tag}_$run" 90 env $var "$bin" bench $model --batch "${BENCH_BATCH:-8,64}" \
        $flag $cfg
    done
  done
  i=$((i + 1))
done
tar -czf "$OUT/ab_call.tgz" -C "$res" .
cat "$res/env.txt"
grep -hE "^\[  (FAILED|PASSED) |Failure" "$res"/gemm_mma.txt "$res"/gpu_test_*.txt 2>/dev/null | head -20
if [ -f "$res/check.txt" ]; then
  echo "check: ok $(grep -c '^ok' "$res/check.txt"), not ok:"; grep -vE "^ok " "$res/check.txt" | tail -n 6
fi
for f in "$res"/bench_*.txt; do
  [ -f "$f" ] || continue
  echo "=== $(basename "$f" .txt)"; grep -E "^ +[0-9]+ +[0-9.]+ +\[" "$f" | awk '{print $1, $2, $6}'
done
cat "$res/summary.txt"
