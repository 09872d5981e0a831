# Call 3: the decode layer's NaN outputs at fp8 M = 3 / 4 (calls 1, 2): main against new on fresh
# seeds, the Qwen3.5 fp8 TP4 decode sizes only.
set -u
mkdir -p "$OUT/p"
{ date -u; nvidia-smi -L; } > "$OUT/p/env.txt"
for i in 1 2 3 4 5 6; do
  for side in main .; do
    timeout 60 .devbin/$side/moetune check --model qwen3.5-122b-a10b-fp8 --tp 4 --batch 1,2,3,4 --configs 1 --layer-only > "$OUT/p/check_${side/./new}_$i.txt" 2>&1
    echo "$side $i: $(tail -n 1 "$OUT/p/check_${side/./new}_$i.txt")"; grep FAIL "$OUT/p/check_${side/./new}_$i.txt" | head -3
  done
done
