#!/bin/bash
# Thirty-second session, one device call on either GPU (carry .devbin, built by
# pdl_build_devbin.sh): the routing's L2 prefetch of GEMM1's first w13 columns through the TMA's
# tensor prefetch (`--route-prefetch N`, kernels/common/route_prefetch.cuh: one 32 KB box per
# lane from the routing's own warps; the thread-per-line version lost, results/
# 2026-12-06_h100_thirtysecond_session.md). About 4 minutes.
#   1. gpu_test_moe_route_prefetch (the layer's bits with and without it; EP rank 1 of 2);
#   2. `check --route-prefetch 4` of both fp8 anchors at M = 8, 16, 32 against fp64;
#   3. the layer A/B at M = 8, 16, 32, AB_RUNS (default 2) interleaved runs: the default, 1 / 2 /
#      4 columns, and --no-align-in-gemm1 (the H200's path) with 0 / 2 / 4 columns.
# Prediction: the routing grid is as without the prefetch (the widened grid and its ~1 µs are
# gone), so what is left is the columns' worth in the idle window from the top-k to GEMM1's
# first copy: M = 8 -0.5..-1.5% on the default path, -1..-2% on the align-launch path; at
# M = 32 (4x the picks, the same window) ~0 with 1-2 columns and a loss at 4.
# Output: $OUT/ab/ab_call.tgz and consoles; a short table last.
set -u
mkdir -p "$OUT"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
echo "gpu: $gpu"; cat .devbin/commit.txt
export MOETUNE_CACHE_DIR=/tmp/moetune-cache
timeout -k 5 240 .devbin/gpu_test_moe_route_prefetch --gtest_color=no >"$OUT/test_route_prefetch.txt" 2>&1
echo "gpu_test_moe_route_prefetch rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/test_route_prefetch.txt" | tr '\n' ' ')"
grep -E "^FAIL" "$OUT/test_route_prefetch.txt" | head -n 5
i=0
for model in "--model qwen3.5-122b-a10b-fp8 --tp 4" "--model deepseek-v3 --tp 8"; do
  # shellcheck disable=SC2086
  timeout 90 .devbin/moetune check $model --route-prefetch 4 --batch 8,16,32 --configs 1 \
    >"$OUT/check_$i.txt" 2>&1
  echo "check $i rc=$?: ok $(grep -c '^ok' "$OUT/check_$i.txt"), $(tail -n 1 "$OUT/check_$i.txt")"
  grep -vE "^ok " "$OUT/check_$i.txt" | head -n 5
  i=$((i + 1))
done
SIDES="new!measured-ceilings new!route-prefetch=1!measured-ceilings new!route-prefetch=2!measured-ceilings"
SIDES="$SIDES new!route-prefetch=4!measured-ceilings new!no-align-in-gemm1!measured-ceilings"
SIDES="$SIDES new!no-align-in-gemm1!route-prefetch=2!measured-ceilings"
SIDES="$SIDES new!no-align-in-gemm1!route-prefetch=4!measured-ceilings"
OUT=$OUT/ab TESTS=none CHECK_BATCH=none RUNS=${AB_RUNS:-2} BENCH_BATCH=8,16,32 \
  BENCH_MODELS="--model qwen3.5-122b-a10b-fp8 --tp 4;--model deepseek-v3 --tp 8" SIDES="$SIDES" \
  timeout -k 5 330 bash bench/scripts/stage_ab.sh >"$OUT/ab_console.txt" 2>&1
echo "stage_ab: exit $?"
grep -E "exit [^0]" "$OUT/ab_console.txt" | head -n 5
# Median layer µs per side and M over the runs, and the change against the first side.
python3 - "$OUT/ab/ab_call.tgz" <<'EOF'
import re, statistics, sys, tarfile, collections
t = tarfile.open(sys.argv[1])
d = collections.defaultdict(list)
for m in t.getmembers():
    g = re.match(r"\./bench_(\d+)_(.+)_(\d+)\.txt$", m.name)
    if not g: continue
    for line in t.extractfile(m).read().decode().splitlines():
        r = re.match(r"^\s+(\d+)\s+([0-9.]+)\s+\[", line)
        if r: d[(g.group(1), g.group(2), int(r.group(1)))].append(float(r.group(2)))
sides = sorted({k[1] for k in d}, key=lambda s: (len(s), s))
for model in sorted({k[0] for k in d}):
    base = "new_measured-ceilings"
    print(f"model {model}: median µs [min-max] of {base}, then change of the others")
    for M in sorted({k[2] for k in d if k[0] == model}):
        b = d.get((model, base, M), [])
        if not b: continue
        mb = statistics.median(b)
        row = [f"M={M:<4} {mb:8.2f} [{min(b):.2f}-{max(b):.2f}]"]
        for s in sides:
            if s == base or (model, s, M) not in d: continue
            v = d[(model, s, M)]
            row.append(f"{s.replace('new_', '').replace('_measured-ceilings', '')}: "
                       f"{100 * (statistics.median(v) / mb - 1):+.1f}% [{min(v):.2f}-{max(v):.2f}]")
        print("  " + "  ".join(row))
EOF
