#!/usr/bin/env bash
# seconds: 560
# Session 10's second call. First the GPU tests of what has not run on a GPU: written-out
# attention as the flash kernel with a repeating mask (test_attention_pattern.py), the attention
# tests (both attention paths forced) and the ViT, BERT, T5, GPT-2 and Swin families. Then where
# GPT-2's and ViT-B/16's GPU time goes in bf16 (kernel_profile.py), and the bf16 four-baseline
# table continued (session10a's rows resumed) for vision models, T5 and the decode step.
set -u
out="${AREA_OUT:-/tmp/session10b-out}"
mkdir -p "$out"
start=$(date +%s)
export CAP="${CAP:-555}"
. "$(dirname "$0")/_steps.sh"
gpu_tests 120 "$out/gpu-tests.txt" tests/builtin/test_attention_pattern.py \
  tests/builtin/test_attention.py tests/real_models/test_gpu_families.py \
  -k "pattern or attention or vit or bert or t5 or gpt2 or swin"
echo "gpu tests rc=$? ($(since))"
grep -E "^(FAILED|ERROR)|passed|failed" "$out/gpu-tests.txt" | cut -c1-250 | tail -n 12
grep -E "^E .*(Mismatch|Greatest|error|Error|assert)" "$out/gpu-tests.txt" | cut -c1-250 | head -n 8
export STITCH_MODEL_SIZE=full
rm_=benchmarks/real_models
STITCH_MODEL_DTYPE=bfloat16 timeout "$(step 100)" python3 benchmarks/kernel_profile.py \
  $rm_/hf_gpt2.py $rm_/tv_vit_b_16.py --top 12 > "$out/profile-bf16.txt" 2>&1
echo "profile rc=$? ($(since))"
grep -vE "Warning|warn" "$out/profile-bf16.txt" | cut -c1-200 | head -n 70
cp benchmarks/results/session10a-compile-bfloat16-h200-2026-12-07.json "$out/compile-bfloat16.json"
. "$(dirname "$0")/_dtype_sweep.sh"
files="$rm_/tv_vit_b_16.py $rm_/timm_vit_small.py $rm_/tv_swin_t.py $rm_/tv_convnext_tiny.py \
  $rm_/hf_t5_encoder.py tests/data/stitch_problems/level3/1_LlamaDecodeStep.py \
  $rm_/tv_resnet50.py $rm_/timm_efficientnet_b0.py"
left=$(( CAP - ($(date +%s) - start) ))
KEEP_ROWS=1 DTYPES=bfloat16 BUDGET=$(( CAP - 5 )) dtype_sweep compile 10 $files \
  --compile --compile-jobs 8 --compile-warm-seconds $(( left / 3 ))
