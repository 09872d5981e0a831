# Call 1: main's never-run GPU test (MoeDecodeGpu.RoutesAsTheStageKernelsAtOtherRouterWidths),
# the M = 1 timeline of main and of the copies-first bulk path (decode_probe), then a layer A/B
# of four builds: main (c835756), amax (exp/decode-amax-redux ac29487), cf
# (exp/decode-copies-first b402f22) and new = cfa (exp/decode-cf-amax: cf + amax), with cfa's
# GPU tests and check at M = 1, 2.
set -u
mkdir -p "$OUT/p"
{ date -u; nvidia-smi -L; for d in main amax cf; do echo "$d: $(cat .devbin/$d/commit.txt)"; done;
  echo "new: $(cat .devbin/commit.txt)"; } > "$OUT/p/env.txt"
cat "$OUT/p/env.txt"
timeout 150 .devbin/main/gpu_test_moe_decode --gtest_color=no > "$OUT/p/main_decode_test.txt" 2>&1
echo "main gpu_test_moe_decode rc $?"; grep -E "^\[  (FAILED|PASSED)|OtherRouterWidths" "$OUT/p/main_decode_test.txt" | head
timeout 150 .devbin/cf/gpu_test_moe_decode --gtest_color=no > "$OUT/p/cf_decode_test.txt" 2>&1
echo "cf gpu_test_moe_decode rc $?"; grep -E "^\[  (FAILED|PASSED)" "$OUT/p/cf_decode_test.txt" | head
for s in main cf; do
  timeout 120 stdbuf -oL .devbin/decode_probe_$s "$OUT/p/probe_log_$s.txt" > "$OUT/p/probe_$s.txt" 2>&1
  echo "probe $s rc $?"
done
gzip -f "$OUT"/p/probe_log_*.txt
OUT=$OUT/a SIDES="main amax cf new" CHECK_BATCH=1,2 CHECK_S=70 RUNS=3 BENCH_BATCH=1,2,3,4 \
  BENCH_MODELS="--model qwen3.5-122b-a10b-fp8 --tp 4;--model qwen3.5-122b-a10b --tp 4;--model deepseek-v3 --tp 8" \
  bash bench/scripts/stage_ab.sh > "$OUT/p/ab.txt" 2>&1
grep -E "^\[  (FAILED|PASSED)|^check|exit [^0]" "$OUT/p/ab.txt" | head -20
for s in main cf; do echo "== probe $s"; grep -E "check:|M=1 cold|timeline|^  " "$OUT/p/probe_$s.txt" | head -40; done
