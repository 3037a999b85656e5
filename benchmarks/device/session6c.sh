#!/usr/bin/env bash
# seconds: 115
# Session 6, the last minutes of device time: the flash attention's GPU tests, the decode step
# and GPT-2 / Llama in bf16 (small configs), in 8 pytest workers sharing the GPU.
set -u
out="${AREA_OUT:-/tmp/session6c-out}"
mkdir -p "$out"
start=$(date +%s)
timeout 105 python3 -m pytest -m gpu -n 8 tests/builtin/test_attention.py \
  tests/real_models/test_gpu_families.py -k "attention or decode or (bfloat16 and (gpt2 or llama))" \
  -p no:cacheprovider -q -rA -W ignore -o addopts="--import-mode=importlib" > "$out/tests.txt" 2>&1
echo "GPU tests rc=$? ($(( $(date +%s) - start )) s)"
grep -E "^(PASSED|FAILED|ERROR)|passed|failed|Mismatch|Greatest" "$out/tests.txt" | cut -c1-220 | tail -n 30
