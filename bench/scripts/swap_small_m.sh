#!/bin/bash
# One device call (about 2 minutes): block fp8's stage GEMMs at M = 2..8 under moetune's default
# configs against swap-AB tables (m16 n128 k128 w4, up s3 with SPLIT_K 1/2/4/8, down s2), the
# stage kernels only (--no-decode-kernels), on both fp8 anchors, interleaved twice. Question: does
# the default's swap-AB lower bound (spe >= 0.25, M = 8 on the anchors) leave M = 5..7 on the
# slower unswapped split-K tiles? Carry .devbin with moetune. Summary last.
set -uo pipefail
batch=${BENCH_BATCH:-2,3,4,5,6,7,8}
out=/tmp/swap_small_m; mkdir -p "$out/tables" "${OUT:=$PWD/swap_small_m_out}"
export MOETUNE_CACHE_DIR=/tmp/moetune_swap_cache
{ date -u; cat .devbin/commit.txt; nvidia-smi -L; } > "$out/env.txt"
for s in 1 2 4 8; do  # the same tiles at every M of the batch list
  up="" down=""
  for M in ${batch//,/ }; do
    up+="\"$M\": {\"BLOCK_SIZE_M\": 16, \"BLOCK_SIZE_N\": 128, \"BLOCK_SIZE_K\": 128, \"GROUP_SIZE_M\": 1, \"num_warps\": 4, \"num_stages\": 3, \"SPLIT_K\": $s, \"SWAP_AB\": 1},"
    down+="\"$M\": {\"BLOCK_SIZE_M\": 16, \"BLOCK_SIZE_N\": 128, \"BLOCK_SIZE_K\": 128, \"GROUP_SIZE_M\": 1, \"num_warps\": 4, \"num_stages\": 2, \"SWAP_AB\": 1},"
  done
  echo "{${up%,}}" > "$out/tables/swap$s.json"
  echo "{${down%,}}" > "$out/tables/swap${s}_down.json"
done
step() {  # step NAME SECONDS command...
  local name=$1 secs=$2; shift 2
  local t0=$(date +%s)
  timeout -k 5 "$secs" "$@" >"$out/$name.txt" 2>&1
  echo "$name: exit $? in $(( $(date +%s) - t0 )) s" | tee -a "$out/summary.txt"
}
i=0
for model in "--model qwen3.5-122b-a10b-fp8 --tp 4" "--model deepseek-v3 --tp 8"; do
  for run in 1 2; do
    for side in default swap1 swap2 swap4 swap8; do
      cfg=""; [ "$side" = default ] || cfg="--config $out/tables/$side.json"
      # shellcheck disable=SC2086
      step "bench_${i}_${side}_$run" 90 .devbin/moetune bench $model --batch "$batch" --no-decode-kernels $cfg
    done
  done
  i=$((i + 1))
done
tar -czf "$OUT/swap_small_m.tgz" -C "$out" .
# Layer µs and GEMM phase µs per side, mean of the two runs.
python3 - "$out" <<'PY'
import glob, re, sys, collections
d = collections.defaultdict(list)
for f in glob.glob(sys.argv[1] + "/bench_*.txt"):
    i, side, run = re.match(r".*bench_(\d)_(\w+?)_(\d)\.txt", f).groups()
    for line in open(f):
        p = line.replace("[", " ").replace(",", " ").replace("]", " ").split()
        if len(p) > 5 and p[0].isdigit():
            d[(i, side, int(p[0]))].append((float(p[1]), float(p[4])))
sides = ["default", "swap1", "swap2", "swap4", "swap8"]
for i, name in (("0", "Qwen3.5 fp8 TP4"), ("1", "DeepSeek-V3 fp8 TP8")):
    print(name, "layer / GEMM phase µs, mean of runs:", " | ".join(sides))
    for M in sorted({k[2] for k in d if k[0] == i}):
        cells = []
        for s in sides:
            v = d.get((i, s, M), [])
            cells.append(f"{sum(a for a, _ in v) / len(v):7.2f} / {sum(b for _, b in v) / len(v):7.2f}" if v else "-")
        print(f"  M={M:<3}", " | ".join(cells))
PY
cat "$out/summary.txt"
