#!/bin/bash
# Device call (seconds): bench/scripts/l2hint/l2hint_probe.cu's variants, each in its own
# process, and the SASS of the copies where cuobjdump is on the machine. Build here first:
#   nvcc -std=c++17 -gencode arch=compute_90a,code=sm_90a -o .devbin/l2hint_probe \
#     bench/scripts/l2hint/l2hint_probe.cu
for v in 0 1 2 3 4 5; do timeout 20 .devbin/l2hint_probe $v; done
command -v cuobjdump >/dev/null || PATH=$PATH:/usr/local/cuda/bin
cuobjdump -sass .devbin/l2hint_probe 2>/dev/null |
  grep -E "Function|LDGSTS|POLICY|UBLKCP|CCTL" | head -40
