#!/usr/bin/env bash
# seconds: 540
# Issue 23's table: all 30 level-2 dev problems against the four baselines (eager, eager in a
# CUDA graph, torch.compile, reduce-overhead), fp32, TF32 off; then the level-2 GPU tests of
# the builtin coder (epilogues in cuBLASLt, rewrites) if time is left.
set -u
out="${AREA_OUT:-/tmp/session11b-out}"
mkdir -p "$out"
start=$(date +%s)
export CAP="${CAP:-535}"
. "$(dirname "$0")/_steps.sh"
timeout "$(step 420)" python3 benchmarks/l3program_speed.py tests/data/kernelbench/level2 \
  --jobs 8 --runs 10 --compile --compile-jobs 8 --resume --json "$out/level2.json" \
  > "$out/level2.txt" 2>&1
echo "level 2 rc=$? ($(since))"
grep -E "correct=|Error" "$out/level2.txt" | cut -c1-300
gpu_tests 110 "$out/gpu-tests.txt" tests/builtin/test_gpu_program.py \
  tests/builtin/test_gpu_correctness.py
echo "gpu tests rc=$? ($(since))"
grep -hE "^(FAILED|ERROR)|passed|failed" "$out"/gpu-tests*.txt | cut -c1-250 | tail -n 12
