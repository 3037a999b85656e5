#!/usr/bin/env bash
# seconds: 170
# Session 9's last call, on what budget was left: the attention choice (our flash kernel or
# PyTorch's sdpa, timed per site) and the copy-free q/k/v split on a GPU: the attention tests
# (both paths forced, and the timed choice), the ViT, BERT and T5 family tests, then ViT-B/16,
# ViT-S, BERT and GPT-2 in bf16 at full size.
set -u
out="${AREA_OUT:-/tmp/session9d-out}"
mkdir -p "$out"
start=$(date +%s)
export CAP="${CAP:-165}"
. "$(dirname "$0")/_steps.sh"
gpu_tests 60 "$out/gpu-tests.txt" tests/builtin/test_attention.py \
  tests/real_models/test_gpu_families.py -k "attention or vit or bert or t5 or gpt2"
echo "gpu tests rc=$? ($(since))"
grep -E "^(FAILED|ERROR)|passed|failed" "$out/gpu-tests.txt" | cut -c1-250 | tail -n 12
grep -E "^E .*(Mismatch|Greatest|error|Error)" "$out/gpu-tests.txt" | cut -c1-250 | head -n 8
export STITCH_MODEL_SIZE=full
rm_=benchmarks/real_models
STITCH_MODEL_DTYPE=bfloat16 timeout "$(step 100)" python3 benchmarks/l3program_speed.py \
  $rm_/tv_vit_b_16.py $rm_/timm_vit_small.py $rm_/hf_bert.py $rm_/hf_gpt2.py --jobs 4 --runs 10 \
  --resume --json "$out/bf16.json" > "$out/bf16.txt" 2>&1
echo "bf16 rc=$? ($(since))"
grep -E "correct=|attention sites|FAILED|Error|float64" "$out/bf16.txt" | cut -c1-300
