#!/usr/bin/env bash
# seconds: 560
# For the session after 11: what session 11 left untested on a GPU.
# 1. GPU tests: the programs the new rewrites shorten (test_gpu_algebra.py), the attention
#    paths with the GPU-only choice timing, then the builtin coder's program and correctness
#    files with the time they need (their builds did not finish in 110 s in session 11).
# 2. ViT-S and ViT-B/16 in bf16 against the four baselines: does the choice keep sdpa now?
set -u
out="${AREA_OUT:-/tmp/session12a-out}"
mkdir -p "$out"
start=$(date +%s)
export CAP="${CAP:-555}"
. "$(dirname "$0")/_steps.sh"
gpu_tests 90 "$out/gpu-tests-algebra.txt" tests/builtin/test_gpu_algebra.py \
  tests/builtin/test_attention.py -k "algebra or rewritten or paths"
echo "gpu tests (algebra, attention) rc=$? ($(since))"
export STITCH_MODEL_SIZE=full
rm_=benchmarks/real_models
STITCH_MODEL_DTYPE=bfloat16 timeout "$(step 170)" python3 benchmarks/l3program_speed.py \
  $rm_/timm_vit_small.py $rm_/tv_vit_b_16.py --jobs 2 --runs 10 --compile --compile-jobs 2 \
  --json "$out/vit.json" > "$out/vit.txt" 2>&1
echo "vit rc=$? ($(since))"
grep -E "correct=|sdpa at|Error" "$out/vit.txt" | cut -c1-300
unset STITCH_MODEL_SIZE
gpu_tests 280 "$out/gpu-tests-builtin.txt" tests/builtin/test_gpu_program.py \
  tests/builtin/test_gpu_correctness.py
echo "gpu tests (builtin) rc=$? ($(since))"
grep -hE "^(FAILED|ERROR)|passed|failed" "$out"/gpu-tests*.txt | cut -c1-250 | tail -n 14
