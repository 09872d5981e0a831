#!/bin/bash
# On a device machine (repository root, .devbin/moetune): a tune at a few batch sizes, then the
# layer with the tuned tables against the defaults (interleaved runs), so a tuner change is
# seen end to end. Env: MODEL (moetune flags), BATCH, RUNS. Output in $OUT/tune_*.
set -uo pipefail
out=${OUT:-$PWD/tune_out}
mkdir -p "$out/t"
export MOETUNE_CACHE_DIR=${MOETUNE_CACHE_DIR:-/tmp/moetune-cache}
MODEL=${MODEL:---model qwen3.5-122b-a10b-fp8 --tp 4}
BATCH=${BATCH:-8,32}
start=$(date +%s)
# shellcheck disable=SC2086
timeout 300 .devbin/moetune tune $MODEL --batch "$BATCH" --out "$out/t" >"$out/tune_stdout.txt" 2>&1
echo "tune rc=$? in $(( $(date +%s) - start )) s"; tail -n 15 "$out/tune_stdout.txt"
# The device tool does not bring back names holding '=' or ',': plain-named copies beside them.
for f in "$out"/t/*; do cp "$f" "$out/$(basename "$f" | tr '=,' '__')"; done
up=$(ls "$out"/t/E=*.json 2>/dev/null | grep -vE '_down.json|meta.json' | head -n 1)
echo "up table: ${up:-none}"
[ -n "$up" ] || exit 1
for r in $(seq 1 "${RUNS:-2}"); do
  # shellcheck disable=SC2086
  .devbin/moetune bench $MODEL --batch "$BATCH" >"$out/tune_bench_default_$r.txt" 2>&1
  # shellcheck disable=SC2086
  .devbin/moetune bench $MODEL --batch "$BATCH" --config "$up" >"$out/tune_bench_tuned_$r.txt" 2>&1
  echo "run $r default:"; tail -n 4 "$out/tune_bench_default_$r.txt"
  echo "run $r tuned:"; tail -n 4 "$out/tune_bench_tuned_$r.txt"
done
