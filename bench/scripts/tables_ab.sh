#!/bin/bash
# One device call (1-3 minutes): `moetune bench` of one model under moetune's defaults against
# each config table in TABLES (a folder of NAME.json with NAME_down.json beside it), interleaved
# twice. Carry .devbin with moetune. Summary last (layer / GEMM phase µs, mean of the two runs).
# Env: TABLES (folder), MODEL ("--model qwen3.5-122b-a10b --tp 4"), BENCH_BATCH (4,5,6,7,8,16),
#      FLAGS (extra bench flags; default --no-decode-kernels).
set -uo pipefail
tables=${TABLES:?a folder of config tables} model=${MODEL:-"--model qwen3.5-122b-a10b --tp 4"}
batch=${BENCH_BATCH:-4,5,6,7,8,16} flags=${FLAGS:---no-decode-kernels}
out=/tmp/tables_ab; rm -rf "$out"; mkdir -p "$out" "${OUT:=$PWD/tables_ab_out}"
export MOETUNE_CACHE_DIR=/tmp/moetune_tables_cache
{ date -u; cat .devbin/commit.txt; nvidia-smi -L; echo "$model $flags $tables"; } > "$out/env.txt"
names="default"
for f in "$tables"/*.json; do
  case $f in *_down.json) continue ;; esac
  names+=" $(basename "$f" .json)"
done
for run in 1 2; do
  for side in $names; do
    cfg=""; [ "$side" = default ] || cfg="--config $tables/$side.json"
    t0=$(date +%s)
    # shellcheck disable=SC2086
    timeout -k 5 90 .devbin/moetune bench $model --batch "$batch" $flags $cfg \
      >"$out/bench_${side}_$run.txt" 2>&1
    echo "bench_${side}_$run: exit $? in $(( $(date +%s) - t0 )) s" | tee -a "$out/summary.txt"
  done
done
tar -czf "$OUT/tables_ab.tgz" -C "$out" .
python3 - "$out" $names <<'PY'
import glob, re, sys, collections
d = collections.defaultdict(list)
for f in glob.glob(sys.argv[1] + "/bench_*.txt"):
    side, run = re.match(r".*bench_(\w+?)_(\d)\.txt", f).groups()
    for line in open(f):
        p = line.replace("[", " ").replace(",", " ").replace("]", " ").split()
        if len(p) > 5 and p[0].isdigit():
            d[(side, int(p[0]))].append((float(p[1]), float(p[4])))
sides = sys.argv[2:]
print("layer / GEMM phase µs, mean of runs:", " | ".join(sides))
for M in sorted({k[1] for k in d}):
    cells = []
    for s in sides:
        v = d.get((s, M), [])
        cells.append(f"{sum(a for a, _ in v) / len(v):7.2f} / {sum(b for _, b in v) / len(v):7.2f}" if v else "-")
    print(f"  M={M:<4}", " | ".join(cells))
PY
