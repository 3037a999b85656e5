#!/usr/bin/env bash
# seconds: 560
# Still to run after session 13 (whose one short call ran session13c only): the rewrites of
# sessions 12 and 13 and the rows kept in registers, on a GPU, with their timings.
# 1. GPU tests: every program the algebra shortens (test_gpu_algebra.py: sum_before_linear,
#    pool_before_linear, spatial_sum_of_conv_transpose global/padded/depth,
#    pool_of_conv_transpose), then the attention paths with the GPU-only choice timing.
# 2. The held-out level-2 problems the catalogue rewrites (HELDOUT2_DIR, default
#    .heldout/level2, carried as an ignored folder: KernelBench's level 2 less the dev folder),
#    against the four baselines.
# 3. Kernel profiles of 37 and 99 (the reduction tails); Mixtral and Qwen2-MoE moved to session13b.
# 1b. The builtin coder's program and correctness GPU files, right after the algebra tests;
#     then the library families whose q/k/v GEMMs are merged (BERT, Llama, T5, the decode step).
# ViT against the four baselines is in session13b.
set -u
out="${AREA_OUT:-/tmp/session13a-out}"
mkdir -p "$out"
start=$(date +%s)
export CAP="${CAP:-555}"
. "$(dirname "$0")/_steps.sh"
gpu_tests 90 "$out/gpu-tests-algebra.txt" tests/builtin/test_gpu_algebra.py \
  tests/builtin/test_attention.py -k "algebra or rewritten or paths"
echo "gpu tests (algebra, attention) rc=$? ($(since))"
gpu_tests 150 "$out/gpu-tests-builtin.txt" tests/builtin/test_gpu_program.py \
  tests/builtin/test_gpu_correctness.py
echo "gpu tests (builtin) rc=$? ($(since))"
# The library families whose q, k, v (and gate, up) GEMMs are now one (gemms_sharing_an_input)
gpu_tests 80 "$out/gpu-tests-families.txt" tests/real_models/test_gpu_families.py \
  -k "bert or llama or t5 or decode"
echo "gpu tests (families with merged GEMMs) rc=$? ($(since))"
# Reduction tails with the row kept in registers (session 13): 37's packed GroupNorm (0.625 ms in
# session 11 against torch.compile's 0.416) and 99's softmax, beside torch.compile's kernels
timeout "$(step 60)" python3 benchmarks/kernel_profile.py tests/data/kernelbench/level2 \
  --only 37,99 --compile --top 6 > "$out/kernel-profile-37-99.txt" 2>&1
echo "profile 37, 99 rc=$? ($(since))"
heldout_level2 170
grep -hE "^(FAILED|ERROR)|passed|failed" "$out"/gpu-tests*.txt | cut -c1-250 | tail -n 14
