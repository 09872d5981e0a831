#!/bin/bash
# On a device machine (repository root, .devbin carried): issue 4's quality bar. A normal sweep
# and an --exhaustive one over the same batch sizes (default 1,64,1024; the default model unless
# arguments say otherwise, e.g. --gpus 2), sharing one JIT cache, then
# bench/scripts/tune_quality.py compares each winner with the exhaustive best per GEMM.
# The exhaustive run times every valid config (about 4,000 per M for the default model: about
# 20 minutes of GPU time for three sizes on one H200, more than one device call may run), so the
# script can stop at a deadline and continue: the runs live in QUALITY_WORK, each stopped run is
# resumed (tune --resume) by the next invocation with the same QUALITY_WORK on the same machine
# (keep it warm between calls: the JIT cache lives in /tmp too).
# Every stop also packs the runs (record logs, tables, markers) into $OUT/runs.tar.gz, so a run
# stopped on one machine continues on a fresh one: pass that file back as QUALITY_SEED (carry it
# in .devbin). The record logs resume per config, not per batch size (tune --resume).
# Env: OUT (default ./tune_quality_out: quality.md and the logs land there), MOETUNE_BIN,
#      QUALITY_BATCH (default 1,64,1024), QUALITY_WORK (default $OUT), QUALITY_DEADLINE_S
#      (stop the tune runs after this many seconds, SIGTERM: they write what is finished),
#      QUALITY_SEED (a runs.tar.gz of an earlier call, unpacked into an empty QUALITY_WORK).
# Exit: 0 every finished winner within the limit, 1 one above (tune_quality.py), 2 bad input
#       (QUALITY_SEED cannot be unpacked or QUALITY_WORK holds something else; the comparison's
#       own bad input), 3 when the deadline came first, 4 when both runs ended but no batch size
#       is finished (e.g. a --budget left them all "not reached"), a tune run's own exit status
#       when it failed otherwise.
set -uo pipefail
bin=${MOETUNE_BIN:-.devbin/moetune}
out=${OUT:-$PWD/tune_quality_out}
work=${QUALITY_WORK:-$out}
batch=${QUALITY_BATCH:-1,64,1024}
deadline=${QUALITY_DEADLINE_S:-86400}
export MOETUNE_CACHE_DIR=${MOETUNE_CACHE_DIR:-/tmp/moetune_quality_cache}
mkdir -p "$out" "$work"
t_start=$(date +%s)
if [ -n "${QUALITY_SEED:-}" ]; then
  if [ -f "$work/runs.txt" ]; then
    echo "QUALITY_SEED ignored: $work already holds runs (continuing those)"
  elif [ -n "$(ls -A "$work")" ]; then
    echo "QUALITY_SEED: $work is not empty; seed into an empty QUALITY_WORK"; exit 2
  else
    tar -xzf "$QUALITY_SEED" -C "$work" || { echo "QUALITY_SEED: cannot unpack $QUALITY_SEED"; exit 2; }
    echo "seeded $work from $QUALITY_SEED" | tee -a "$work/runs.txt"
  fi
fi

# run NAME [tune args...]: one tune run into $work/NAME, resumed if an earlier call left its log.
run() {
  local name=$1; shift
  local left=$((deadline - ($(date +%s) - t_start)))
  ((left > 5)) || return 3
  local resume=()
  compgen -G "$work/$name/*.tune.jsonl" >/dev/null && resume=(--resume)
  local t0=$(date +%s)
  timeout -s TERM -k 30 "$left" "$bin" tune "${resume[@]}" --batch "$batch" --out "$work/$name" \
    "$@" >>"$work/$name.stdout" 2>>"$work/$name.stderr"
  local rc=$?
  echo "$name: exit $rc after $(($(date +%s) - t0)) s${resume:+ (resumed)}" | tee -a "$work/runs.txt"
  ((rc == 0)) && touch "$work/$name.done"
  ((rc == 124 || rc == 137)) && return 3  # the deadline (timeout's TERM, then KILL)
  return "$rc"
}

# The logs into $out as they stand (also when the deadline stops the runs), and every run packed
# into $out/runs.tar.gz (written aside, then renamed: a half-written pack never stands there).
collect() {
  [ "$work" = "$out" ] || cp "$work"/*.txt "$work"/*.stdout "$work"/*.stderr "$out/" 2>/dev/null
  tar -czf "$out/.runs.tar.gz.part" -C "$work" --exclude='./runs.tar.gz' --exclude='./.runs.tar.gz.part' . &&
    mv -f "$out/.runs.tar.gz.part" "$out/runs.tar.gz"
}
# What both runs have measured so far against each other (rows of unfinished batch sizes are
# marked partial and do not count toward the verdict).
compare() {
  compgen -G "$work/exhaustive/*.tune.jsonl" >/dev/null && [ -f "$work/tuned.done" ] || return 0
  python3 "$(dirname "$0")/tune_quality.py" "$work/tuned" "$work/exhaustive" | tee "$out/quality.md"
  return "${PIPESTATUS[0]}"
}
# stopped NAME RC: the deadline (3) asks for another call; any other failure is reported as is.
stopped() {
  collect
  if (($2 == 3)); then
    compare
    echo "deadline: run again with QUALITY_WORK=$work (same machine) or QUALITY_SEED=$out/runs.tar.gz (a fresh one) to continue"
  else echo "$1 failed (exit $2):"; tail -n 3 "$work/$1.stderr"; fi
  exit "$2"
}
if [ ! -f "$work/tuned.done" ]; then run tuned "$@" || stopped tuned $?; fi
if [ ! -f "$work/exhaustive.done" ]; then run exhaustive --exhaustive "$@" || stopped exhaustive $?; fi
collect
compare
rc=$?
((rc == 3)) && exit 4  # nothing finished to judge (3 here means the deadline)
exit "$rc"
