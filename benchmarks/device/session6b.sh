#!/usr/bin/env bash
# seconds: 185
# Session 6, the last device time (machines came rarely): the flash attention's GPU tests and
# the real-model families' decode step and bf16 language models, in 8 pytest workers sharing
# the GPU (correctness only: nothing is timed in parallel).
set -u
out="${AREA_OUT:-/tmp/session6b-out}"
mkdir -p "$out"
start=$(date +%s)
timeout 170 python3 -m pytest -m gpu -n 8 tests/builtin/test_attention.py \
  tests/real_models/test_gpu_families.py -k "attention or decode or bfloat16" -p no:cacheprovider \
  -q -rA -W ignore -o addopts="--import-mode=importlib" > "$out/tests.txt" 2>&1
echo "GPU tests rc=$? ($(( $(date +%s) - start )) s)"
grep -E "^(PASSED|FAILED|ERROR)|passed|failed|Mismatch|Greatest" "$out/tests.txt" | cut -c1-220 | tail -n 40
