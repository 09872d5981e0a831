#!/bin/bash
# Device probe (repository root, carry .devbin): where a decode layer's time goes in the PDL
# chain itself, not stage by stage in isolation as `moetune profile` times them. nsys traces
# `moetune bench` (cold, CUDA graph, PDL; each graph node traced) on the fp8 anchors at
# CHAIN_BATCH (default 8,32), with the defaults and with FLAGS2 (default --no-align-in-gemm1).
# chain_timeline.py then splits each layer at its kernels' ends: the routing's end after the
# previous layer's end, then each later stage's end after the one before it.
# Output: $OUT/*.csv (nsys cuda_gpu_trace) and the table chain_timeline.py prints.
set -uo pipefail
mkdir -p "$OUT"
nsys=$(command -v nsys || ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems*/bin/nsys \
  /usr/local/cuda*/nsight-systems*/bin/nsys 2>/dev/null | head -n 1)
if [ -z "$nsys" ]; then echo "no nsys on this machine"; exit 0; fi
echo "nsys: $nsys ($("$nsys" --version 2>/dev/null | head -n 1))"
export MOETUNE_CACHE_DIR=${MOETUNE_CACHE_DIR:-/tmp/moetune-cache}
i=0
for model in "--model qwen3.5-122b-a10b-fp8 --tp 4" "--model deepseek-v3 --tp 8"; do
  for M in ${CHAIN_BATCH:-8 32}; do
    for side in default flags2; do
      flags=; [ "$side" = flags2 ] && flags=${FLAGS2:---no-align-in-gemm1}
      name=trace_${i}_m${M}_${side}
      # shellcheck disable=SC2086
      timeout 120 "$nsys" profile --cuda-graph-trace=node --trace=cuda -o "/tmp/$name" \
        --force-overwrite true .devbin/moetune bench $model --batch "$M" $flags \
        >"$OUT/$name.log" 2>&1
      echo "$name: nsys rc=$?"
      timeout 120 "$nsys" stats --report cuda_gpu_trace --format csv -o "$OUT/$name" \
        "/tmp/$name.nsys-rep" >>"$OUT/$name.log" 2>&1
      grep -E "^ +$M +[0-9.]+ +\[" "$OUT/$name.log" | head -n 1
    done
  done
  i=$((i + 1))
done
python3 bench/scripts/chain_timeline.py "$OUT"/trace_*cuda_gpu_trace.csv
