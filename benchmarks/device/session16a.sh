#!/usr/bin/env bash
# seconds: 560
# Session 16's first call: transposed convolutions of few terms computed in the generated
# kernels (compiler/direct_conv.py). Their GPU test and the flash attention's (its loaders and
# split combine changed), the held-out level-2 problems with a ConvTranspose3d of 3 input
# channels against the four baselines, then the builtin GPU tests (program and correctness
# files) as the regression check of the codegen changes.
set -u
out="${AREA_OUT:-/tmp/session16a-out}"
mkdir -p "$out"
start=$(date +%s)
export CAP="${CAP:-555}"
. "$(dirname "$0")/_steps.sh"
gpu_tests 150 "$out/gpu-tests-direct-attention.txt" tests/builtin/test_direct_conv.py \
  tests/builtin/test_attention.py tests/builtin/test_attention_pattern.py
echo "gpu tests (direct conv, attention) rc=$? ($(since))"
tail -n 3 "$out/gpu-tests-direct-attention.txt"
HELDOUT2_ONLY=58,60,72,89,96 heldout_level2 230
gpu_tests 170 "$out/gpu-tests-builtin.txt" tests/builtin/test_gpu_program.py \
  tests/builtin/test_gpu_correctness.py tests/builtin/test_gpu_algebra.py
echo "gpu tests (builtin) rc=$? ($(since))"
grep -hE "^(FAILED|ERROR)|passed|failed" "$out"/gpu-tests*.txt | cut -c1-250 | tail -n 14
