# Call 1 (eighteenth session): the routing's selection on the logits (softmax without bias or
# groups) and moe_decode_up routing the ids only. Sides: main = ef38357, new = the working tree.
set -u
mkdir -p "$OUT/p"
{ date -u; nvidia-smi -L; cat .devbin/commit.txt .devbin/main/commit.txt; } > "$OUT/p/env.txt"
.devbin/route_latency_prev > "$OUT/p/route_prev.txt" 2>&1
.devbin/route_latency > "$OUT/p/route_new.txt" 2>&1
OUT=$OUT/a SIDES="main new" CHECK_BATCH=1,3,4,8 CHECK_S=150 RUNS=4 BENCH_BATCH=1,2,3,4,5,8,16 \
  BENCH_MODELS="--model qwen3.5-122b-a10b-fp8 --tp 4;--model qwen3.5-122b-a10b --tp 4;--model deepseek-v3 --tp 8" \
  bash bench/scripts/stage_ab.sh > "$OUT/p/ab.txt" 2>&1
timeout 90 .devbin/moetune bench --model qwen3.5-122b-a10b-fp8 --tp 4 --measured-ceilings --batch 1,8,16 > "$OUT/p/bars_new.txt" 2>&1
timeout 100 .devbin/decode_probe "$OUT/p/probe_log.txt" > "$OUT/p/probe.txt" 2>&1
echo "== route_latency prev / new"; paste "$OUT/p/route_prev.txt" "$OUT/p/route_new.txt" | cut -c1-160
sed -n '/^gpu_test\|^check/p' "$OUT/p/ab.txt" | head; grep -E "^\[  (FAILED|PASSED)|checks on" "$OUT/p/ab.txt" | head
grep -A3 "^check: ok" "$OUT/p/ab.txt" | head -8
grep -E "^=== bench" -A7 "$OUT/p/ab.txt" | grep -v "^--" | awk '/===/{n=$2; next} {print n, $1, $2}' > "$OUT/p/ab_rows.txt"
python3 - "$OUT/p/ab_rows.txt" <<'PY'
import sys, collections, re
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    n, m, v = line.split()
    mo = re.match(r"bench_(\d+)_(\w+?)_(\d+)$", n)
    d[(int(mo.group(1)), int(m), mo.group(2))].append(float(v))
for (i, m, side) in sorted(d):
    if side != "main": continue
    a, b = d[(i, m, "main")], d.get((i, m, "new"), [])
    if b: print(f"model {i} M={m:3d} main {min(a):8.2f}-{max(a):8.2f}  new {min(b):8.2f}-{max(b):8.2f}  {100*(sorted(b)[len(b)//2]/sorted(a)[len(a)//2]-1):+.1f}%")
PY
grep -E "^ +[0-9]+ +[0-9.]+ +\[" "$OUT/p/bars_new.txt" | head -4
grep -iE "routed|median" "$OUT/p/probe.txt" | head -12
