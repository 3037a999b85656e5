#!/usr/bin/env bash
# seconds: 520
# Session 15's first call, for a short device budget: the GPU tests of the attention paths (with
# the GQA group packed into one tile) and of the BERT, Llama and decode-step families, then the
# decode step and five language and vision models in bf16 at full size against the four
# baselines (issue 22's table; the models the attention and launch changes touch first).
set -u
out="${AREA_OUT:-/tmp/session15a-out}"
mkdir -p "$out"
start=$(date +%s)
export CAP="${CAP:-515}"
. "$(dirname "$0")/_steps.sh"
. "$(dirname "$0")/_dtype_sweep.sh"
gpu_tests 130 "$out/gpu-tests-attention-families.txt" tests/builtin/test_attention.py \
  tests/real_models/test_gpu_families.py -k "packed or decode or paths or bert or llama"
echo "gpu tests (attention, families) rc=$? ($(since))"
grep -hE "^(FAILED|ERROR)|passed|failed" "$out"/gpu-tests*.txt | cut -c1-250 | tail -n 14
export STITCH_MODEL_SIZE=full
rm_=benchmarks/real_models
files="tests/data/stitch_problems/level3/1_LlamaDecodeStep.py $rm_/hf_gpt2.py $rm_/hf_llama.py \
$rm_/timm_vit_small.py $rm_/hf_bert.py $rm_/hf_mistral.py"
DTYPES="${DTYPES:-bfloat16}" BUDGET="${BUDGET:-$CAP}" dtype_sweep lm 10 $files \
  --compile --compile-jobs 6 --compile-warm-seconds "${WARM:-200}"
