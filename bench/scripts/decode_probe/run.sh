#!/bin/bash
# Device call (3-6 minutes; carry .devbin): the GPU tests in .devbin (gpu_test_moe_decode,
# _stages, _pdl), `moetune check` at CHECK_BATCH (unset: skipped), decode_probe (two load
# batchings and precomputed ids, hot and cold, timelines), and `moetune bench` of the builds in
# SIDES (default "prev new": .devbin/prev/moetune and .devbin/moetune; any NAME is
# .devbin/NAME/moetune) at BENCH_BATCH (default 1,2,4) on BENCH_MODELS (default Qwen3.5-122B-A10B
# fp8 TP4; ';'-separated), interleaved twice. Everything lands in $OUT/probe_call.tgz; a summary
# is printed last. Build here first:
#   nvcc -std=c++17 -O3 -I kernels -gencode arch=compute_90a,code=sm_90a \
#     -o .devbin/decode_probe bench/scripts/decode_probe/decode_probe.cu
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../device_call_lib.sh" || exit 1
call_setup probe_call
for t in gpu_test_moe_decode gpu_test_moe_stages gpu_test_moe_pdl; do
  [ -x ".devbin/$t" ] && step "$t" 150 ".devbin/$t" --gtest_color=no
done
[ -n "${CHECK_BATCH:-}" ] && step check "${CHECK_S:-200}" .devbin/moetune check --batch "$CHECK_BATCH" \
  --configs 1 --variants bf16,fp8_block
[ -x .devbin/decode_probe ] && step probe 240 .devbin/decode_probe "$res/probe_log.txt"
IFS=';' read -ra models <<<"${BENCH_MODELS:---model qwen3.5-122b-a10b-fp8 --tp 4}"
i=0
for model in "${models[@]}"; do
  for run in 1 2; do
    for side in ${SIDES:-prev new}; do
      bin=.devbin/$side/moetune; [ "$side" = new ] && bin=.devbin/moetune
      # shellcheck disable=SC2086
      step "bench_${i}_${side}_$run" 60 "$bin" bench $model --batch "${BENCH_BATCH:-1,2,4}"
    done
  done
  i=$((i + 1))
done
gzip -f "$res/probe_log.txt" 2>/dev/null
tar -czf "$OUT/probe_call.tgz" -C "$res" .
cat "$res/env.txt"
grep -hE "^\[  (FAILED|PASSED) |Failure|rel\. error" "$res"/gpu_test_*.txt | head -30
if [ -f "$res/check.txt" ]; then
  echo "check: ok $(grep -c '^ok' "$res/check.txt"), not ok:"; grep -vE "^ok " "$res/check.txt" | tail -n 6
fi
for f in "$res"/bench_*.txt; do
  echo "=== $(basename "$f" .txt)"; grep -E "^ +[0-9]+ +[0-9.]+ +\[" "$f"
done
[ -f "$res/probe.txt" ] && cat "$res/probe.txt"
cat "$res/summary.txt"
# The SASS of the probe's up kernel (b6, routed): loads and MMAs in program order, condensed.
if command -v cuobjdump >/dev/null || [ -x /usr/local/cuda/bin/cuobjdump ]; then
  PATH=$PATH:/usr/local/cuda/bin
  cuobjdump -sass .devbin/decode_probe >"$res/sass_all.txt" 2>&1
  awk '/Function :/ {on = /up_kILi6ELb1E/} on' "$res/sass_all.txt" >"$res/sass_up.txt"
  grep -oE "LDG[.A-Z0-9]*|HMMA[.A-Z0-9]*|QMMA[.A-Z0-9]*|BAR[.A-Z]*|REDUX[.A-Z]*|SHFL[.A-Z]*" "$res/sass_up.txt" |
    uniq -c | tr '\n' ' ' | cut -c1-1500; echo
  tar -czf "$OUT/probe_call.tgz" -C "$res" .
fi
