#!/bin/bash
# On a device machine (repository root, .devbin/moetune from main): bench/PENDING.md item 2,
# does the decode rule's num_stages hold? `moetune tune` at the decode sizes on the three anchor
# shapes (about 75 s each), then bench/scripts/decode_stages.py over the three runs.
# Env: OUT (default ./decode_stages_out), MOETUNE_BIN (default .devbin/moetune),
#      STAGES_BATCH (default 1,2,4,8,16,32,64,256).
# Exit: decode_stages.py's (0, 2 bad input), or the first tune run's failure.
set -uo pipefail
bin=${MOETUNE_BIN:-.devbin/moetune}
out=${OUT:-$PWD/decode_stages_out}
batch=${STAGES_BATCH:-1,2,4,8,16,32,64,256}
export MOETUNE_CACHE_DIR=${MOETUNE_CACHE_DIR:-/tmp/moetune_stages_cache}
mkdir -p "$out"
dirs=()
for spec in "qwen3.5-122b-a10b-fp8 4" "deepseek-v3 8" "qwen3.5-122b-a10b 4"; do
  set -- $spec
  d="$out/$1_tp$2"
  t0=$(date +%s)
  "$bin" tune --model "$1" --tp "$2" --batch "$batch" --out "$d" >"$d.log" 2>&1
  rc=$?
  echo "$1 tp$2: exit $rc in $(($(date +%s) - t0)) s" | tee -a "$out/runs.txt"
  ((rc == 0)) || exit "$rc"
  dirs+=("$d")
done
python3 "$(dirname "$0")/decode_stages.py" "${dirs[@]}" | tee "$out/decode_stages.md"
