#!/usr/bin/env bash
# seconds: 520
# Session 15's second call: the held-out level-2 problems the catalogue rewrites against the four
# baselines (HELDOUT2_DIR, default .heldout/level2, carried), then the algebra GPU tests and the
# builtin coder's program and correctness files (the rows kept in registers).
set -u
out="${AREA_OUT:-/tmp/session15b-out}"
mkdir -p "$out"
start=$(date +%s)
export CAP="${CAP:-515}"
. "$(dirname "$0")/_steps.sh"
heldout_level2 230
gpu_tests 120 "$out/gpu-tests-algebra.txt" tests/builtin/test_gpu_algebra.py
echo "gpu tests (algebra) rc=$? ($(since))"
gpu_tests 160 "$out/gpu-tests-builtin.txt" tests/builtin/test_gpu_program.py \
  tests/builtin/test_gpu_correctness.py
echo "gpu tests (builtin) rc=$? ($(since))"
grep -hE "^(FAILED|ERROR)|passed|failed" "$out"/gpu-tests*.txt | cut -c1-250 | tail -n 14
