#!/bin/bash
# The device call planned in bench/PENDING.md §3 (issue 5, Qwen3.5 fp8 TP4 at M = 8 and 16), about
# 6 minutes; run from the repository root with carry [".devbin"]. Build first, here:
#   bench/scripts/issue5_build.sh   (moetune and the GPU tests into .devbin, and the route+align
#   variants .devbin/ra16 and .devbin/ra16w; about 12 minutes)
# 1. GEMM1 deriving the alignment (--align-in-gemm1): its GPU test (bit identity with the align
#    launch, the tables against the reference) and `check` at M = 7..32 on the block-fp8 anchors;
# 2. the layer A/B at M = 8, 12, 16, 32 on Qwen3.5 fp8 TP4 and DeepSeek-V3 fp8 TP8: the default,
#    GEMM1 deriving the alignment, routing + alignment in one launch up to M = 16 (256 and 512
#    threads), and bench/tables/fp8_up_deep_ring's tables (its README says what each asks).
# Results: $OUT (the A/B in ab_call.tgz, or ab_call_partial.tgz when cut short).
set -u
mkdir -p "$OUT"
cat .devbin/commit.txt
timeout 240 .devbin/gpu_test_moe_align_in_gemm1 --gtest_color=no >"$OUT/align_in_gemm1_test.txt" 2>&1
echo "gpu_test_moe_align_in_gemm1: exit $?"
grep -E "^\[  (FAILED|PASSED) |^(ok|FAIL) " "$OUT/align_in_gemm1_test.txt" | tail -n 30
timeout 240 .devbin/moetune check --align-in-gemm1 --batch 7,8,16,32 --variants fp8_block \
  --configs 1 >"$OUT/check_align_in_gemm1.txt" 2>&1
echo "check --align-in-gemm1: exit $?"; grep -cE "^ok " "$OUT/check_align_in_gemm1.txt"
grep -vE "^ok " "$OUT/check_align_in_gemm1.txt" | tail -n 8
T=bench/tables/fp8_up_deep_ring
TESTS=none CHECK_BATCH=none RUNS=2 BENCH_BATCH=8,12,16,32 \
  SIDES="new new!align-in-gemm1 ra16 ra16w new+$T/n256s3.json new+$T/n256s4.json new+$T/n256s5.json new+$T/dn64.json new+$T/dn256.json" \
  BENCH_MODELS="--model qwen3.5-122b-a10b-fp8 --tp 4;--model deepseek-v3 --tp 8" \
  timeout -k 5 "${AB_S:-480}" bash bench/scripts/stage_ab.sh
if [ ! -f "$OUT/ab_call.tgz" ]; then
  echo "stage_ab cut short: partial results"
  tar -czf "$OUT/ab_call_partial.tgz" -C /tmp/ab_call .
  cat /tmp/ab_call/summary.txt
  for f in /tmp/ab_call/bench_*.txt; do
    echo "=== $(basename "$f" .txt)"; grep -E "^ +[0-9]+ +[0-9.]+ +\[" "$f" | awk '{print $1, $2, $6}'
  done
fi
