# Call 3: exp/redux-amax2 (the decode amax redux of ac29487, plus act::warp_amax in
# quant_fp8_group, silu_mul_quant and block fp8 GEMM1's fused epilogue) as `new`, against main
# (c835756) and amax (ac29487): GPU tests (gemm_mma block fp8, stages, pdl, decode), check at
# M = 8, 64, 257 and a layer A/B at M = 1..256 on the two fp8 anchors.
set -u
mkdir -p "$OUT/p"
{ date -u; nvidia-smi -L; for d in main amax; do echo "$d: $(cat .devbin/$d/commit.txt)"; done;
  echo "new: $(cat .devbin/commit.txt)"; } > "$OUT/p/env.txt"
cat "$OUT/p/env.txt"
OUT=$OUT/a GEMM_FILTER="*Fp8Block*" SIDES="main amax new" CHECK_BATCH=8,64,257 CHECK_S=150 RUNS=3 \
  BENCH_BATCH=1,2,4,8,16,32,64,128,256 \
  BENCH_MODELS="--model qwen3.5-122b-a10b-fp8 --tp 4;--model deepseek-v3 --tp 8" \
  bash bench/scripts/stage_ab.sh > "$OUT/p/ab.txt" 2>&1
grep -E "^\[  (FAILED|PASSED)|^check|exit [^0]|gemm_mma|gpu_test" "$OUT/p/ab.txt" | head -20
