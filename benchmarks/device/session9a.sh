#!/usr/bin/env bash
# seconds: 400
# Session 9's first call: session 8b's round with this session's changes on top (bf16/fp16
# kernels on the vector path; channels-last convolutions for models that read NCHW as NHWC).
# 1. every GPU family test (both dtypes) and the flash kernel's (cp.async/ldmatrix since the
#    flash-cp-async merge); 2. bf16 at full size: the four bf16 vision models below 1.0x in
#    session 8 (ConvNeXt-T, ConvNeXt-nano, ViT-B/16, ViT-S), Swin-T, GPT-2 (padded head rows),
#    BERT, Llama and the decode step; 3. attention alone against eager sdpa; 4. the ConvNeXts
#    without the channels_last rewrite (what it buys); 5. ConvNeXt and Swin in fp32.
set -u
out="${AREA_OUT:-/tmp/session9a-out}"
mkdir -p "$out"
start=$(date +%s)
export CAP="${CAP:-390}"
. "$(dirname "$0")/_steps.sh"
gpu_tests 100 "$out/gpu-tests.txt" tests/builtin/test_attention.py \
  tests/real_models/test_gpu_families.py
echo "gpu tests rc=$? ($(since))"
grep -E "^(FAILED|ERROR)|passed|failed" "$out/gpu-tests.txt" | cut -c1-250 | tail -n 20
export STITCH_MODEL_SIZE=full
rm_=benchmarks/real_models
bf16="$rm_/tv_convnext_tiny.py $rm_/timm_convnext_nano.py $rm_/tv_vit_b_16.py \
  $rm_/timm_vit_small.py $rm_/tv_swin_t.py $rm_/hf_gpt2.py $rm_/hf_bert.py $rm_/hf_llama.py \
  tests/data/stitch_problems/level3/1_LlamaDecodeStep.py"
STITCH_MODEL_DTYPE=bfloat16 timeout "$(step 170)" python3 benchmarks/l3program_speed.py $bf16 \
  --jobs 9 --runs 10 --json "$out/bf16.json" > "$out/bf16.txt" 2>&1
echo "bf16 rc=$? ($(since))"
grep -E "correct=|FAILED|not handled|geomean|Error|float64" "$out/bf16.txt" | cut -c1-300 | tail -n 24
timeout "$(step 35)" python3 benchmarks/l3program_speed.py benchmarks/attention/*.py --jobs 4 \
  --runs 10 --json "$out/attention.json" > "$out/attention.txt" 2>&1
echo "attention alone rc=$? ($(since))"
grep -E "correct=|geomean|Error" "$out/attention.txt" | cut -c1-250 | tail -n 12
STITCH_MODEL_DTYPE=bfloat16 timeout "$(step 40)" python3 benchmarks/l3program_speed.py \
  $rm_/tv_convnext_tiny.py $rm_/timm_convnext_nano.py --without-rewrite channels_last --jobs 2 \
  --runs 10 --json "$out/bf16-no-cl.json" > "$out/bf16-no-cl.txt" 2>&1
echo "bf16 without channels_last rc=$? ($(since))"
grep -E "correct=|Error" "$out/bf16-no-cl.txt" | cut -c1-300
STITCH_MODEL_DTYPE=float32 timeout "$(step 60)" python3 benchmarks/l3program_speed.py \
  $rm_/tv_convnext_tiny.py $rm_/timm_convnext_nano.py $rm_/tv_swin_t.py --jobs 3 --runs 10 \
  --json "$out/fp32.json" > "$out/fp32.txt" 2>&1
echo "fp32 rc=$? ($(since))"
grep -E "correct=|FAILED|Error|float64" "$out/fp32.txt" | cut -c1-300
