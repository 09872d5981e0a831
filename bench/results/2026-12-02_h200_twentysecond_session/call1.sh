# Call 1: the GEMMs' table reads hoisted (one L2 round trip before the first copy, not two) as
# `new`, against main (47e07b9); two timing-only ablations of new: `noalign` (the align stage
# runs once per workspace, later calls reuse its tables) and `noreduce` (no top-k sum), at M >= 6:
# what those stages cost inside the layer. GPU tests and check of new first.
set -u
mkdir -p "$OUT/p"
{ date -u; nvidia-smi -L; for d in main noalign noreduce; do echo "$d: $(cat .devbin/$d/commit.txt)"; done;
  echo "new: $(cat .devbin/commit.txt)"; } > "$OUT/p/env.txt"
cat "$OUT/p/env.txt"
OUT=$OUT/a GEMM_FILTER="*Fp8Block*:*Qwen35Tp4Bf16*:*OddSizesBf16*" SIDES="main new noalign noreduce" \
  CHECK_BATCH=8,64,257 CHECK_S=120 RUNS=3 BENCH_BATCH=8,16,32,64,128,256 \
  BENCH_MODELS="--model qwen3.5-122b-a10b-fp8 --tp 4 --measured-ceilings;--model deepseek-v3 --tp 8 --measured-ceilings;--model qwen3.5-122b-a10b --tp 4 --measured-ceilings" \
  bash bench/scripts/stage_ab.sh > "$OUT/p/ab.txt" 2>&1
grep -E "^\[  (FAILED|PASSED)|^check|exit [^0]|gemm_mma|gpu_test" "$OUT/p/ab.txt" | head -20
mkdir -p "$OUT/x" && tar -xzf "$OUT/a/ab_call.tgz" -C "$OUT/x"
python3 bench/scripts/ab_table.py "$OUT/x" main > "$OUT/p/ab_table.txt" 2>&1; cat "$OUT/p/ab_table.txt"
