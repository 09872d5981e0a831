#!/bin/bash
# On a device machine (repository root, .devbin carried): issue 4's quality bar. A normal sweep
# and an --exhaustive one over the same batch sizes (default 1,64,1024; the default model unless
# arguments say otherwise, e.g. --gpus 2), sharing one JIT cache, then
# bench/scripts/tune_quality.py compares each winner with the exhaustive best per GEMM.
# The exhaustive run times every valid config (about 4,000 per M for the default model: plan
# about 20 minutes of GPU time for three sizes on one H200; `tune --dry-run --exhaustive` says).
# Env: OUT (default ./tune_quality_out), MOETUNE_BIN, QUALITY_BATCH (default 1,64,1024).
set -uo pipefail
bin=${MOETUNE_BIN:-.devbin/moetune}
out=${OUT:-$PWD/tune_quality_out}
batch=${QUALITY_BATCH:-1,64,1024}
export MOETUNE_CACHE_DIR=${MOETUNE_CACHE_DIR:-/tmp/moetune_quality_cache}
mkdir -p "$out"
t0=$(date +%s)
"$bin" tune --batch "$batch" --out "$out/tuned" "$@" >"$out/tuned.stdout" 2>"$out/tuned.stderr" || exit
t1=$(date +%s)
"$bin" tune --exhaustive --batch "$batch" --out "$out/exhaustive" "$@" \
  >"$out/exhaustive.stdout" 2>"$out/exhaustive.stderr" || exit
t2=$(date +%s)
echo "tuned sweep $((t1 - t0)) s, exhaustive $((t2 - t1)) s"
python3 "$(dirname "$0")/tune_quality.py" "$out/tuned" "$out/exhaustive" | tee "$out/quality.md"
