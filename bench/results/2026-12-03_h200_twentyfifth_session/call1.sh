# Call 1: the top-k sum added into the output by GEMM2's atomics (`new`, the default) against the
# same build's separate top-k sum (`new!deterministic`). GPU tests (test_moe_topk_sum: the fold
# against the separate sum; the bit-identity tests on the deterministic path), check against fp64
# at M = 8, 64, 257 (the fold on by default), the layer A/B at M = 8..4096 on the three anchors,
# five interleaved runs, and a profile of new at M = 8, 16.
# Prediction: -2..-3 µs at M = 8..32 (the no-reduce ablation of call 1, twenty-second session:
# Qwen3.5 fp8 -2.1 / -2.6 / -2.9 µs, DeepSeek-V3 -3.2 / -3.0 / -1.6, bf16 -2.6 / -3.1 / -3.1),
# less or a loss at M >= 256 where the atomics' L2 throughput may bind (M*topk*K adds).
set -u
mkdir -p "$OUT/p"
{ date -u; nvidia-smi -L; echo "new: $(cat .devbin/commit.txt)"; } > "$OUT/p/env.txt"
cat "$OUT/p/env.txt"
OUT=$OUT/a GEMM_FILTER="none" SIDES="new!deterministic new" CHECK_BATCH=8,64,257 CHECK_S=180 RUNS=5 \
  BENCH_BATCH=8,16,32,64,128,256,1024,4096 \
  BENCH_MODELS="--model qwen3.5-122b-a10b-fp8 --tp 4 --measured-ceilings;--model deepseek-v3 --tp 8 --measured-ceilings;--model qwen3.5-122b-a10b --tp 4 --measured-ceilings" \
  bash bench/scripts/stage_ab.sh > "$OUT/p/ab.txt" 2>&1
grep -E "^\[  (FAILED|PASSED)|^check|exit [^0]|gpu_test" "$OUT/p/ab.txt" | head -30
mkdir -p "$OUT/x" && tar -xzf "$OUT/a/ab_call.tgz" -C "$OUT/x"
grep -hE "^(ok|FAIL) " "$OUT/x"/gpu_test_moe_topk_sum.txt > "$OUT/p/topk_sum_test.txt"
echo "topk_sum test lines ok: $(grep -c '^ok' "$OUT/p/topk_sum_test.txt")"; grep "^FAIL" "$OUT/p/topk_sum_test.txt" | head
for m in "--model qwen3.5-122b-a10b-fp8 --tp 4" "--model deepseek-v3 --tp 8"; do
  timeout 60 .devbin/moetune profile $m --batch 8,16 --measured-ceilings
done > "$OUT/p/profile.txt" 2>&1
grep -E "^M=|gemm|reduce" "$OUT/p/profile.txt"
python3 bench/scripts/ab_table.py "$OUT/x" new_deterministic > "$OUT/p/ab_table.txt" 2>&1; cat "$OUT/p/ab_table.txt"
