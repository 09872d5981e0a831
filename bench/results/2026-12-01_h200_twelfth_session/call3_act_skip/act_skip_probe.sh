T=bench/tables/fp8_up_n256; export MOETUNE_CACHE_DIR=/tmp/mc; r=$OUT/r; mkdir -p $r
for mi in 0 1; do model=("qwen3.5-122b-a10b-fp8 --tp 4" "deepseek-v3 --tp 8"); m=${model[$mi]}
for run in 1 2; do
for side in "prev||" "skip|MOETUNE_PROBE_SKIP_ACT=1|" "prev||$T/n256w4s3.json" "skip|MOETUNE_PROBE_SKIP_ACT=1|$T/n256w4s3.json" "prev||$T/n256w4s4.json" "skip|MOETUNE_PROBE_SKIP_ACT=1|$T/n256w8s4.json"; do
IFS='|' read b v c <<<"$side"; tag=$b$([ -n "$v" ] && echo _skip)$([ -n "$c" ] && echo _$(basename $c .json))
env $v .devbin/$b/moetune bench --model $m --batch 8,16,32,64 ${c:+--config $c} > $r/b${mi}_${tag}_$run.txt 2>&1 || echo "FAIL $tag $?"
done; done; done
tar czf $OUT/probe.tgz -C $r .
python3 - $r <<'PY'
import glob,re,sys,collections
d=collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1]+"/b*.txt")):
    mi,tag,run=re.match(r".*/b(\d)_(.*)_(\d)\.txt",f).groups()
    for line in open(f):
        p=line.replace("["," ").replace(","," ").replace("]"," ").split()
        if len(p)>5 and p[0].isdigit(): d[(mi,tag,int(p[0]))].append(float(p[1]))
tags=sorted({k[1] for k in d})
for mi in "01":
  print("model",mi," | ".join(tags))
  for M in (8,16,32,64):
    print(f" M={M:<3}"," | ".join(" ".join(f"{x:7.2f}" for x in d.get((mi,t,M),[])) for t in tags))
PY
nvidia-smi -L
