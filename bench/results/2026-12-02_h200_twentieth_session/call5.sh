# Call 5 (the session's last device time): the tuner at DeepSeek-V3 fp8 TP8 M = 8 (83.7% of the
# measured floor in call 4, bar 85%) and the layer with its table against the defaults, main
# 94dd83e. Everything in $OUT/call5.tgz.
set -u
mkdir -p "$OUT/r"
{ date -u; nvidia-smi -L; cat .devbin/commit.txt; } > "$OUT/r/env.txt"; cat "$OUT/r/env.txt"
OUT=$OUT/r/t MODEL="--model deepseek-v3 --tp 8" BATCH=8 RUNS=3 timeout 200 \
  bash bench/scripts/tune_then_bench.sh > "$OUT/r/tune.txt" 2>&1
echo "rc $?"
tar -czf "$OUT/call5.tgz" -C "$OUT/r" . && rm -rf "$OUT/r"
tar -xzOf "$OUT/call5.tgz" ./tune.txt | tail -40
