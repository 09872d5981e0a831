# Call 4: main 94dd83e (the amax redux landed): issue 5's bars (bench --measured-ceilings on the
# three anchors, M = 1..256), check at M = 1, 2, 4 (the decode kernels) and the M = 1 timeline
# of decode_probe built from main's kernels. Everything in $OUT/call4.tgz.
set -u
mkdir -p "$OUT/r"
{ date -u; nvidia-smi -L; cat .devbin/commit.txt; } > "$OUT/r/env.txt"; cat "$OUT/r/env.txt"
timeout 100 stdbuf -oL .devbin/decode_probe "$OUT/r/probe_log.txt" > "$OUT/r/probe.txt" 2>&1
echo "probe rc $?"; gzip -f "$OUT/r/probe_log.txt"
OUT=$OUT/r/bars BENCH_BATCH=1,8,16,32,64,128,256 CHECK_S=1 bash bench/scripts/final_bars.sh > "$OUT/r/bars.txt" 2>&1
timeout 130 .devbin/moetune check --batch 1,2,4 --configs 1 --variants bf16,fp8_block > "$OUT/r/check.txt" 2>&1
echo "check rc $?: ok $(grep -c '^ok' "$OUT/r/check.txt"), not ok: $(grep -cvE '^ok ' "$OUT/r/check.txt")"
grep -vE "^ok " "$OUT/r/check.txt" | tail -3
tar -czf "$OUT/call4.tgz" -C "$OUT/r" . && rm -rf "$OUT/r"
tar -xzOf "$OUT/call4.tgz" ./bars.txt | grep -E "^ +[0-9]+ +[0-9.]+ +\[|rc="
tar -xzOf "$OUT/call4.tgz" ./probe.txt | grep -E "check:|bulk p2 +M=1|timeline bulk p2 M=1 cold" -A 14 | grep -E "check|bulk p2|up |down |next" | head -24
