#!/bin/bash
# Thirty-fifth session: one device call that does what the GPU it lands on still owes issue 5
# (carry .devbin from pdl_build_devbin.sh). On an H200: issue5_call_h100_defaults.sh's H200 half
# (bars, sliced tests, check --sliced, A/B incl. --sliced at M = 6..32) with AB_RUNS=2. On an
# H100: issue5_call_sliced_default.sh (the sliced default at M = 6..8 checked, A/B'd, bars).
set -u
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
if [[ "$gpu" == *H200* ]]; then
  H200_ONLY=1 AB_RUNS=${AB_RUNS:-2} CALL_S=${CALL_S:-560} bash bench/scripts/issue5_call_h100_defaults.sh
else
  bash bench/scripts/issue5_call_sliced_default.sh
fi
