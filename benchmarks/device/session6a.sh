#!/usr/bin/env bash
# seconds: 380
# Session 6, one call for all (machines came rarely): the flash attention's GPU tests, the
# real-model families' GPU tests (bf16 attention and the decode step among them), the
# transformer language models and the decode step in bf16 at full size against all four
# baselines, then attention alone (benchmarks/attention) against eager sdpa.
set -u
out="${AREA_OUT:-/tmp/session6a-out}"
mkdir -p "$out"
start=$(date +%s)
timeout 90 python3 -m pytest -m gpu tests/builtin/test_attention.py -p no:cacheprovider -q -rA \
  -W ignore -o addopts="--import-mode=importlib" > "$out/attention-tests.txt" 2>&1
echo "attention tests rc=$? ($(( $(date +%s) - start )) s)"
grep -E "^(PASSED|FAILED|ERROR)|passed|failed|Mismatch|Greatest|Error" "$out/attention-tests.txt" | cut -c1-250 | tail -n 30
timeout 110 python3 -m pytest -m gpu tests/real_models/test_gpu_families.py -p no:cacheprovider \
  -q -rA -W ignore -o addopts="--import-mode=importlib" > "$out/families.txt" 2>&1
echo "families rc=$? ($(( $(date +%s) - start )) s)"
grep -E "^(PASSED|FAILED|ERROR)|passed|failed" "$out/families.txt" | cut -c1-250 | tail -n 40
timeout 45 python3 benchmarks/l3program_speed.py benchmarks/attention/*.py --jobs 4 --runs 20 \
  --json "$out/attention.json" > "$out/attention-speed.txt" 2>&1
echo "attention speed rc=$? ($(( $(date +%s) - start )) s)"
grep -E "correct=|vs eager|geomean|Error" "$out/attention-speed.txt" | cut -c1-250 | tail -n 12
lms="tests/data/stitch_problems/level3/1_LlamaDecodeStep.py benchmarks/real_models/hf_llama.py benchmarks/real_models/hf_gpt2.py benchmarks/real_models/hf_bert.py benchmarks/real_models/hf_mistral.py benchmarks/real_models/hf_qwen2.py benchmarks/real_models/hf_phi.py benchmarks/real_models/hf_t5_encoder.py"
left=$(( 370 - ($(date +%s) - start) ))
STITCH_MODEL_SIZE=full STITCH_MODEL_DTYPE=bfloat16 timeout "$left" python3 benchmarks/l3program_speed.py \
  $lms --jobs 8 --runs 10 --compile --json "$out/lm-bf16-compile.json" > "$out/lm-bf16-compile.txt" 2>&1
echo "language models bf16 with compile rc=$? ($(( $(date +%s) - start )) s)"
grep -E "correct=|FAILED|not handled|geomean|Error|float64" "$out/lm-bf16-compile.txt" | cut -c1-260 | tail -n 24
