#!/bin/bash
# Call 4 (carry .devbin with ring_copy built by the nvcc line in bench/scripts/decode_probe/
# ring_copy.cu): the copy-only ring at M = 8 / 16's grids, whole or half K per block; then
# `moetune profile` of Qwen3.5 fp8 TP4 at M = 8, 16 without and with --sliced.
mkdir -p $OUT; RING_COPY_SPLIT=1 timeout 120 .devbin/ring_copy > $OUT/ring_copy.txt 2>&1; echo rc=$?; cat $OUT/ring_copy.txt; export MOETUNE_CACHE_DIR=/tmp/moetune-cache; for f in "" "--sliced"; do timeout 60 .devbin/moetune profile --model qwen3.5-122b-a10b-fp8 --tp 4 --batch 8,16 --measured-ceilings $f > $OUT/profile$f.txt 2>&1; echo "profile $f rc=$?"; cat $OUT/profile$f.txt | head -30; done; nvidia-smi --query-gpu=name,uuid --format=csv,noheader
