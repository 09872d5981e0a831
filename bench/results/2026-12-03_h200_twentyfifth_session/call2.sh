# Call 2: issue 5's bars at the commit that turns the top-k sum in GEMM2 on at every M (efb1028):
# final_bars.sh (bench --measured-ceilings at M = 1..256 on the three anchors, then the check set
# of bf16 and block fp8 against fp64 with the defaults), then the GEMM-phase-free deterministic
# bars of Qwen3.5 fp8 on the same GPU for the record.
# Prediction (call 1's gains on call 3's slower GPU of the twenty-fourth session): Qwen3.5 fp8
# M = 8 / 16 / 32 / 256 about 73.9 / 80.5 / 85.5 / 87.1%, DeepSeek-V3 M = 8 about 86%, bf16
# M = 8 about 87%; the rest above 85%; M = 1 unchanged (the decode kernels).
set -u
OUT=$OUT/bars BENCH_BATCH=1,8,16,32,64,128,256 CHECK_S=330 bash bench/scripts/final_bars.sh
cat "$OUT/bars/env.txt"
timeout 40 .devbin/moetune bench --model qwen3.5-122b-a10b-fp8 --tp 4 --measured-ceilings \
  --batch 8,16,32,256 --deterministic > "$OUT/bars/bench_qwen_fp8_deterministic.txt" 2>&1
grep -E "^ +[0-9]+ " "$OUT/bars/bench_qwen_fp8_deterministic.txt"
