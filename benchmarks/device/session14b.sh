#!/usr/bin/env bash
# seconds: 470
# Session 14's first call: session13a's work in less time. The GPU tests of sessions 12 to 14
# (the algebra programs, the attention paths, the families with merged GEMMs and the decode
# step's cache stores and combined launches, then the builtin coder's program and correctness
# files: the rows kept in registers), then the held-out level-2 problems the catalogue
# rewrites, against the four baselines (HELDOUT2_DIR, default .heldout/level2, carried).
set -u
out="${AREA_OUT:-/tmp/session14b-out}"
mkdir -p "$out"
start=$(date +%s)
export CAP="${CAP:-465}"
. "$(dirname "$0")/_steps.sh"
gpu_tests 150 "$out/gpu-tests-algebra-families.txt" tests/builtin/test_gpu_algebra.py \
  tests/builtin/test_attention.py tests/real_models/test_gpu_families.py \
  -k "algebra or rewritten or paths or bert or llama or t5 or decode"
echo "gpu tests (algebra, attention, families) rc=$? ($(since))"
gpu_tests 150 "$out/gpu-tests-builtin.txt" tests/builtin/test_gpu_program.py \
  tests/builtin/test_gpu_correctness.py
echo "gpu tests (builtin) rc=$? ($(since))"
heldout_level2 170
grep -hE "^(FAILED|ERROR)|passed|failed" "$out"/gpu-tests*.txt | cut -c1-250 | tail -n 14
