#!/bin/bash
# On a device machine (from the repository root, with .devbin carried): how long `moetune tune`
# takes on the default model (qwen3.5-122b-a10b-fp8 at TP4, the 18 default batch sizes unless
# arguments say otherwise), first with a cold JIT cache (a fresh MOETUNE_CACHE_DIR: every kernel
# compiled by NVRTC), then again into another folder with that cache warm. Prints each run's
# wall time, then the warm run's report table last.
# Build the binary first, here: cmake --build build-tgpu --target moetune && mkdir -p .devbin &&
#   cp build-tgpu/src/cli/moetune .devbin/moetune
# Usage: bench/scripts/tune_speed.sh [more `moetune tune` arguments, e.g. --batch 1,64,1024]
# Env: OUT (default ./tune_speed_out), MOETUNE_BIN (default .devbin/moetune), TUNE_CACHE_DIR
#      (the JIT cache both runs share, emptied first; default /tmp/moetune_tune_speed_cache),
#      TUNE_RUN_TIMEOUT (seconds per run, default 145: both runs fit in 5 minutes),
#      TUNE_RUNS ("cold warm" by default; "cold" alone, or "warm" over a cache kept from before).
set -uo pipefail
bin=${MOETUNE_BIN:-.devbin/moetune}
out=${OUT:-$PWD/tune_speed_out}
per_run=${TUNE_RUN_TIMEOUT:-145}
mkdir -p "$out"
cache=${TUNE_CACHE_DIR:-/tmp/moetune_tune_speed_cache}  # outside $OUT: not carried back
case " ${TUNE_RUNS:-cold warm} " in *" cold "*) rm -rf "$cache" ;; esac
rm -rf "$out/tune" "$out/tune_warm" "$out"/tune.std* "$out"/tune_warm.std*  # no stale report
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
  git log -1 --format='commit %H %s' 2>/dev/null || true
  echo "args: $*"
} 2>&1 | tee "$out/env.txt"

# run LABEL DEST [args...]: one sweep into DEST with the shared cache; prints its wall time.
run() {
  local label=$1 dest=$2
  shift 2
  local t0 t1 rc
  t0=$(date +%s%N)
  MOETUNE_CACHE_DIR="$cache" timeout -k 10 "$per_run" "$bin" tune --out "$dest" "$@" \
    >"$dest.stdout" 2>"$dest.stderr"
  rc=$?
  t1=$(date +%s%N)
  local ms=$(((t1 - t0) / 1000000))
  printf '%s cache: wall %d.%d s (exit %d%s)\n' "$label" $((ms / 1000)) $((ms % 1000 / 100)) "$rc" \
    "$([ "$rc" -eq 124 ] && echo ", killed after ${per_run} s")"
  grep -E "measurements in|budget" "$dest.stdout" | head -2
  if [ "$rc" -ne 0 ]; then
    echo "--- $label stderr (last lines)"
    tail -n 15 "$dest.stderr"
  fi
  return "$rc"
}

# TUNE_RUNS="cold" (or "warm" with a cache left by an earlier run) runs only those.
rc_cold=- rc_warm=-
runs=${TUNE_RUNS:-cold warm}
case " $runs " in *" cold "*) run cold "$out/tune" "$@"; rc_cold=$? ;; esac
case " $runs " in *" warm "*) run warm "$out/tune_warm" "$@"; rc_warm=$? ;; esac
echo "kernels in the cache: $(find "$cache" -type f 2>/dev/null | wc -l)"

# The last run that ran: its summary table and its report.
last=$out/tune.stdout
[ -f "$out/tune_warm.stdout" ] && last=$out/tune_warm.stdout
report=$(sed -n 's/^report:  *//p' "$last" 2>/dev/null | head -1)
echo "== result table ($(basename "$last"))"
sed -n '/^ *M  *result/,/measurements in/p' "$last" 2>/dev/null
if [ -n "$report" ] && [ -f "$report" ]; then
  echo "== report table ($report)"
  grep -E '^\|' "$report" | head -40
fi
echo "cold rc=$rc_cold warm rc=$rc_warm"
