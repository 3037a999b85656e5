#!/usr/bin/env bash
# seconds: 380
# Session 9's second call: attention sites may run PyTorch's sdpa where the warm-up call times
# it faster (runtime/choice.py). The GPU tests of attention (both paths forced, and the timed
# choice) and of every family; then bf16 at full size: the models with attention and the two
# ConvNeXts (no attention: unchanged, as a check of the run-to-run spread).
set -u
out="${AREA_OUT:-/tmp/session9c-out}"
mkdir -p "$out"
start=$(date +%s)
export CAP="${CAP:-370}"
. "$(dirname "$0")/_steps.sh"
gpu_tests 100 "$out/gpu-tests.txt" tests/builtin/test_attention.py \
  tests/real_models/test_gpu_families.py
echo "gpu tests rc=$? ($(since))"
grep -E "^(FAILED|ERROR)|passed|failed" "$out/gpu-tests.txt" | cut -c1-250 | tail -n 20
grep -E "^E .*(Mismatch|Greatest|error|Error)" "$out/gpu-tests.txt" | cut -c1-250 | head -n 12
export STITCH_MODEL_SIZE=full
rm_=benchmarks/real_models
bf16="$rm_/tv_vit_b_16.py $rm_/timm_vit_small.py $rm_/tv_swin_t.py $rm_/hf_gpt2.py \
  $rm_/hf_bert.py $rm_/hf_t5_encoder.py $rm_/hf_llama.py $rm_/hf_mistral.py $rm_/hf_phi.py \
  $rm_/hf_qwen2.py tests/data/stitch_problems/level3/1_LlamaDecodeStep.py \
  $rm_/tv_convnext_tiny.py $rm_/timm_convnext_nano.py $rm_/timm_mobilevit_xxs.py"
STITCH_MODEL_DTYPE=bfloat16 timeout "$(step 250)" python3 benchmarks/l3program_speed.py $bf16 \
  --jobs 14 --runs 10 --resume --json "$out/bf16.json" > "$out/bf16.txt" 2>&1
echo "bf16 rc=$? ($(since))"
grep -E "correct=|attention sites|FAILED|not handled|geomean|Error|float64" "$out/bf16.txt" \
  | cut -c1-300 | tail -n 50
