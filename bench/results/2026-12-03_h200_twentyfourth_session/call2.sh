# Call 2: GEMM2 folds the top-k sum at M <= 32 (`new`: FOLD_TOPK, on top of call 1's hoisted
# table reads) against main (47e07b9) and `new!no-fold-topk` (the same build with the sum's own
# launch: call 1's hoist). GPU tests (the fold's
# bit-identity test is MoePdlGpu.FoldedTopkSumBitIdenticalToItsLaunch), check against fp64 at
# M = 1, 8, 16, 32 (the fold on by default), the layer A/B at M = 1..64 on the three anchors, and a
# profile of new at M = 8.
set -u
mkdir -p "$OUT/p"
{ date -u; nvidia-smi -L; for d in main; do echo "$d: $(cat .devbin/$d/commit.txt)"; done;
  echo "new: $(cat .devbin/commit.txt)"; } > "$OUT/p/env.txt"
cat "$OUT/p/env.txt"
OUT=$OUT/a GEMM_FILTER="none" SIDES="main new!no-fold-topk new" CHECK_BATCH=1,8,16,32 CHECK_S=150 RUNS=5 \
  BENCH_BATCH=1,8,16,32,64 \
  BENCH_MODELS="--model qwen3.5-122b-a10b-fp8 --tp 4 --measured-ceilings;--model deepseek-v3 --tp 8 --measured-ceilings;--model qwen3.5-122b-a10b --tp 4 --measured-ceilings" \
  bash bench/scripts/stage_ab.sh > "$OUT/p/ab.txt" 2>&1
grep -E "^\[  (FAILED|PASSED)|^check|exit [^0]|gpu_test|^(ok|FAIL) " "$OUT/p/ab.txt" | head -30
mkdir -p "$OUT/x" && tar -xzf "$OUT/a/ab_call.tgz" -C "$OUT/x"
grep -hE "^(ok|FAIL) +.*folds" "$OUT/x"/gpu_test_moe_pdl.txt | head -60 > "$OUT/p/fold_test.txt"
grep -c "^ok" "$OUT/p/fold_test.txt"; grep "^FAIL" "$OUT/p/fold_test.txt" | head
for m in "--model qwen3.5-122b-a10b-fp8 --tp 4" "--model deepseek-v3 --tp 8"; do
  timeout 60 .devbin/moetune profile $m --batch 8,16 --measured-ceilings
done > "$OUT/p/profile.txt" 2>&1
grep -E "^M=|gemm2|reduce" "$OUT/p/profile.txt"
python3 bench/scripts/ab_table.py "$OUT/x" main > "$OUT/p/ab_table.txt" 2>&1; cat "$OUT/p/ab_table.txt"
