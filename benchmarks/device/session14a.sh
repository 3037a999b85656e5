#!/usr/bin/env bash
# seconds: 560
# Session 14's second call: the language models whose q/k/v and gate/up GEMMs are now one
# (session 13's gemms_sharing_an_input, bias and residual epilogues), and the decode step, in
# bf16 at full size against the four baselines; then the two ViTs that session13b would have run.
set -u
out="${AREA_OUT:-/tmp/session14a-out}"
mkdir -p "$out"
start=$(date +%s)
. "$(dirname "$0")/_steps.sh"
. "$(dirname "$0")/_dtype_sweep.sh"
export STITCH_MODEL_SIZE=full
rm_=benchmarks/real_models
files="tests/data/stitch_problems/level3/1_LlamaDecodeStep.py $rm_/hf_bert.py $rm_/hf_llama.py \
$rm_/hf_qwen2.py $rm_/hf_mistral.py $rm_/hf_t5_encoder.py $rm_/hf_phi.py $rm_/hf_gpt2.py \
$rm_/timm_vit_small.py $rm_/tv_vit_b_16.py"
DTYPES="${DTYPES:-bfloat16}" BUDGET="${BUDGET:-550}" dtype_sweep lm 10 $files \
  --compile --compile-jobs 8 --compile-warm-seconds "${WARM:-220}"
