#!/bin/bash
# On a device machine (repository root, .devbin from bench/scripts/gemm_build_devbin.sh): swap-AB
# (SWAP_AB = 1) against the fp64 reference (test_gemm_mma: every shape and dtype, its swap-AB
# configs beside the others), then GEMM1 and GEMM2 timed alone, cold (test_gemm_speed), at the
# decode sizes on the three anchor shapes. Prints, per shape, M and GEMM, the best unswapped and
# the best swapped config and their ratio. Logs and jsonl in $OUT.
# Env: SWAP_M (default 8,64,256), SWAP_CHECK_FILTER (GoogleTest filter, default every test).
set -uo pipefail
out=${OUT:-$PWD/swapab_out}
mkdir -p "$out"
export MOETUNE_CACHE_DIR=${MOETUNE_CACHE_DIR:-/tmp/moetune-cache}
{ date -u
  nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.max.sm --format=csv; } \
  >"$out/env.txt" 2>&1
timeout 300 .devbin/test_gemm_mma --gtest_filter="${SWAP_CHECK_FILTER:-*}" \
  >"$out/gemm_check.log" 2>&1
echo "check rc=$?"
grep -E "^\[  FAILED|NONDET|nan_rows [1-9]" "$out/gemm_check.log" | head -20
echo "swap-AB cases: $(grep -c '_ab1' "$out/gemm_check.log"), worst error:"
grep '_ab1' "$out/gemm_check.log" \
  | awk '{for(i=1;i<=NF;i++) if($i=="err") print $(i+1), $3, $4, $5}' | sort -g | tail -3
MOETUNE_GEMM_BENCH_OUT="$out" MOETUNE_GEMM_BENCH_M=${SWAP_M:-8,64,256} timeout 420 \
  .devbin/test_gemm_speed >"$out/gemm_speed.log" 2>&1
echo "speed rc=$?"
python3 - "$out/gemm_speed.jsonl" <<'PY'
import json, sys
best = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "config" not in r:  # the GEMM-phase records of the best pairs
        continue
    c = r["config"]
    name = ("m{BLOCK_SIZE_M}n{BLOCK_SIZE_N}k{BLOCK_SIZE_K}_g{GROUP_SIZE_M}_w{num_warps}"
            "_s{num_stages}_sk{SPLIT_K}").format(**c)
    key = (r["shape"], r["M"], r["stage"], c.get("SWAP_AB", 0))
    if key not in best or r["median_us"] < best[key][0]:
        best[key] = (r["median_us"], name)
print(f"{'shape':18} {'M':>5} {'GEMM':4} {'best unswapped':>34} {'best swap-AB':>34} {'ratio':>6}")
for (shape, M, stage, sw) in sorted(best):
    if sw: continue
    a = best[(shape, M, stage, 0)]
    b = best.get((shape, M, stage, 1))
    if b is None: continue
    print(f"{shape:18} {M:5} {stage:4} {a[1]:>24} {a[0]:8.2f} {b[1]:>24} {b[0]:8.2f}"
          f" {b[0] / a[0]:6.3f}")
PY
