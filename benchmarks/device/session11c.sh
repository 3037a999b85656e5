#!/usr/bin/env bash
# seconds: 300
# Packed short rows (several rows per block, shuffles only): level 2's 37_Matmul_Swish_Sum_GroupNorm
# and the other norm problems against the four baselines, the GroupNorm kernel's profile, and the
# builtin coder's correctness GPU tests (full-size level 2 among them).
set -u
out="${AREA_OUT:-/tmp/session11c-out}"
mkdir -p "$out"
start=$(date +%s)
export CAP="${CAP:-295}"
. "$(dirname "$0")/_steps.sh"
timeout "$(step 60)" python3 benchmarks/kernel_profile.py tests/data/kernelbench/level2 \
  --only 37 --top 4 > "$out/profile-37.txt" 2>&1
echo "profile rc=$? ($(since))"
grep -vE "Warning|warn" "$out/profile-37.txt" | cut -c1-160 | head -n 14
timeout "$(step 120)" python3 benchmarks/l3program_speed.py tests/data/kernelbench/level2 \
  --only 37,30,21,17,19 --jobs 5 --runs 10 --compile --compile-jobs 5 --json "$out/norms.json" \
  > "$out/norms.txt" 2>&1
echo "norms rc=$? ($(since))"
grep -E "correct=|Error" "$out/norms.txt" | cut -c1-300
gpu_tests 110 "$out/gpu-tests.txt" tests/builtin/test_gpu_correctness.py
echo "gpu tests rc=$? ($(since))"
grep -hE "^(FAILED|ERROR)|passed|failed" "$out"/gpu-tests*.txt | cut -c1-250 | tail -n 12
