#!/bin/bash
# One device call that verifies a build end to end (carry .devbin holding a moetune binary built
# from the commit in .devbin/commit.txt): moetune check on the anchor shapes, a short tune sweep
# (cold JIT cache), and cold bench of the three anchor shapes with moetune's defaults.
# Logs under $OUT; a short summary last. Each step has its own time cap.
set -uo pipefail
bin=.devbin/moetune
out=${OUT:-$PWD/verify_out}
mkdir -p "$out"
export MOETUNE_CACHE_DIR=/tmp/moetune_verify_cache
{ date -u; cat .devbin/commit.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; } | tee "$out/env.txt"
step() {  # step NAME SECONDS args...
  local name=$1 secs=$2; shift 2
  local t0=$(date +%s)
  timeout -k 5 "$secs" "$bin" "$@" >"$out/$name.txt" 2>&1
  local rc=$?
  echo "$name: exit $rc in $(( $(date +%s) - t0 )) s" | tee -a "$out/summary.txt"
}
step check 75 check --batch 1,64,1024 --configs 2
step tune 80 tune --batch 1,64 --budget 60s --out "$out/tune"
step bench_qwen_fp8 40 bench --measured-ceilings
step bench_qwen_bf16 35 bench --model qwen3.5-122b-a10b --tp 4 --measured-ceilings
step bench_dsv3_fp8 40 bench --model deepseek-v3 --tp 8 --measured-ceilings
for f in check tune bench_qwen_fp8 bench_qwen_bf16 bench_dsv3_fp8; do
  echo "=== $f"; tail -n 22 "$out/$f.txt"
done
cat "$out/summary.txt"
