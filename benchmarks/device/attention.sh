#!/usr/bin/env bash
# seconds: 420
# The flash attention kernel (stitch_lsp/compiler/attention.py): its GPU tests against the model
# in fp32 math, then attention alone (benchmarks/attention: GPT-2 and BERT shapes, Llama-style
# GQA, a decode step) timed against eager sdpa, then the real-model families' GPU tests.
set -u
out="${AREA_OUT:-/tmp/attention-out}"
mkdir -p "$out"
start=$(date +%s)
timeout 150 python3 -m pytest -m gpu tests/builtin/test_attention.py -p no:cacheprovider -q -rA \
  -W ignore -o addopts="--import-mode=importlib" > "$out/tests.txt" 2>&1
echo "attention tests rc=$? ($(( $(date +%s) - start )) s)"
grep -E "^(PASSED|FAILED|ERROR)|passed|failed|Error|mismatch|Greatest" "$out/tests.txt" | cut -c1-250 | tail -n 30
timeout 120 python3 benchmarks/l3program_speed.py benchmarks/attention/*.py --jobs 4 --runs 20 \
  --json "$out/attention.json" > "$out/speed.txt" 2>&1
echo "attention speed rc=$? ($(( $(date +%s) - start )) s)"
cut -c1-250 "$out/speed.txt" | tail -n 20
STITCH_MODEL_SIZE=full STITCH_MODEL_DTYPE=bfloat16 timeout 150 python3 benchmarks/l3program_speed.py \
  benchmarks/real_models/hf_{gpt2,bert,llama,mistral,qwen2}.py --jobs 5 --runs 10 \
  --json "$out/lm-bf16.json" > "$out/lm-bf16.txt" 2>&1
echo "language models bf16 rc=$? ($(( $(date +%s) - start )) s)"
grep -E "correct=|FAILED|not handled|geomean|Error|float64" "$out/lm-bf16.txt" | cut -c1-250 | tail -n 20
left=$(( 400 - ($(date +%s) - start) ))
timeout "$left" python3 -m pytest -m gpu tests/real_models/test_gpu_families.py -p no:cacheprovider \
  -q -rA -W ignore -o addopts="--import-mode=importlib" > "$out/families.txt" 2>&1
echo "families rc=$? ($(( $(date +%s) - start )) s)"
grep -E "^(PASSED|FAILED|ERROR)|passed|failed" "$out/families.txt" | cut -c1-250 | tail -n 40
