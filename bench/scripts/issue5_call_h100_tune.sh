#!/bin/bash
# Twenty-ninth session, device call 2 (an H100 SXM; carry .devbin, main with the H100 rules):
# does a tuned table beat the defaults on the H100 at decode sizes, and does `--align-in-gemm1`
# repeat its twenty-eighth-session gain on another H100? For each fp8 anchor: `moetune tune` at
# M = 8, 16, 32, 64 (2 minutes at most), then the layer A/B of the defaults, the tuned tables
# and --align-in-gemm1, three interleaved runs. Prediction: tuned within +-1% of the defaults at
# M = 8..32 (the decode defaults came from the H200's tuner runs, same 132 SMs), unknown at 64;
# --align-in-gemm1 -0.5..-1.1% at M = 8, 16, 32 (fused n256 up tile) as on call 2 of the
# twenty-eighth session. The first run (rerun with TUNE_BATCH=8,16,32 EXTRA_SIDE=1, which adds
# the tuned tables with --align-in-gemm1) lost its tables to a wrong file name. Output: $OUT/tune_<i>/ (tables, report), $OUT/ab_<i>/ab_call.tgz.
set -u
mkdir -p "$OUT" /tmp/tq
nvidia-smi --query-gpu=name,uuid --format=csv,noheader; cat .devbin/commit.txt
export MOETUNE_CACHE_DIR=/tmp/moetune_tune_cache
i=0
for model in "--model qwen3.5-122b-a10b-fp8 --tp 4" "--model deepseek-v3 --tp 8"; do
  t0=$(date +%s)
  # shellcheck disable=SC2086
  timeout -k 5 170 .devbin/moetune tune $model --batch ${TUNE_BATCH:-8,16,32,64} --budget 150s --seed 29 \
    --out "$OUT/tune_$i" >"$OUT/tune_${i}_console.txt" 2>&1
  echo "tune $i: exit $? in $(( $(date +%s) - t0 )) s"; tail -n 12 "$OUT/tune_${i}_console.txt"
  # The tables' names hold spaces and brackets: plain copies for the A/B (and for $OUT, whose
  # files come back only under plain names).
  up=$(find "$OUT/tune_$i" -name 'E=*.json' ! -name '*_down*' ! -name '*.meta.json' | head -n 1)
  cp "$up" /tmp/tq/tq$i.json && cp "${up%.json}_down.json" /tmp/tq/tq${i}_down.json
  cp /tmp/tq/tq$i.json /tmp/tq/tq${i}_down.json "$OUT/"
  cp "${up%.json}.report.md" "$OUT/tune_${i}_report.md"
  python3 -c "import json,sys; [print(p, json.load(open(p))) for p in sys.argv[1:]]" /tmp/tq/tq$i.json /tmp/tq/tq${i}_down.json
  OUT=$OUT/ab_$i TESTS=none CHECK_BATCH=none RUNS=3 BENCH_BATCH=${TUNE_BATCH:-8,16,32,64} BENCH_MODELS="$model" \
    SIDES="new!measured-ceilings new!measured-ceilings+/tmp/tq/tq$i.json new!align-in-gemm1!measured-ceilings${EXTRA_SIDE:+ new!align-in-gemm1!measured-ceilings+/tmp/tq/tq$i.json}" \
    timeout -k 5 150 bash bench/scripts/stage_ab.sh >"$OUT/ab_${i}_console.txt" 2>&1
  echo "stage_ab $i: exit $?"
  i=$((i + 1))
done
