#!/usr/bin/env bash
# seconds: 530
# Session 7, one call for the first GPU run of the flash attention kernel and the bf16/fp16
# epilogues: their GPU tests, the real-model families' GPU tests (bf16 attention, the decode
# step), the eight language models in bf16 at full size against eager and eager under a CUDA
# graph, attention alone against eager sdpa, then torch.compile and reduce-overhead for the
# language-model families while time is left.
set -u
out="${AREA_OUT:-/tmp/session7-out}"
mkdir -p "$out"
start=$(date +%s)
. "$(dirname "$0")/_steps.sh"
gpu_tests 80 "$out/attention-tests.txt" tests/builtin/test_attention.py
echo "attention tests rc=$? ($(since))"
grep -E "^(PASSED|FAILED|ERROR)|passed|failed|Mismatch|Greatest|Error" "$out/attention-tests.txt" | cut -c1-250 | tail -n 30
gpu_tests 110 "$out/families.txt" tests/real_models/test_gpu_families.py
echo "families rc=$? ($(since))"
grep -E "^(PASSED|FAILED|ERROR)|passed|failed" "$out/families.txt" | cut -c1-250 | tail -n 40
export STITCH_MODEL_SIZE=full STITCH_MODEL_DTYPE=bfloat16
lms="$(ls benchmarks/real_models/hf_*.py) tests/data/stitch_problems/level3/1_LlamaDecodeStep.py"
timeout "$(step 150)" python3 benchmarks/l3program_speed.py $lms --jobs 8 --runs 10 \
  --json "$out/lm-bf16.json" > "$out/lm-bf16.txt" 2>&1
echo "language models bf16 rc=$? ($(since))"
grep -E "correct=|FAILED|not handled|geomean|Error|float64" "$out/lm-bf16.txt" | cut -c1-260 | tail -n 24
timeout "$(step 40)" python3 benchmarks/l3program_speed.py benchmarks/attention/*.py --jobs 4 --runs 20 \
  --json "$out/attention.json" > "$out/attention-speed.txt" 2>&1
echo "attention speed rc=$? ($(since))"
grep -E "correct=|vs eager|geomean|Error" "$out/attention-speed.txt" | cut -c1-250 | tail -n 12
left=$(( ${CAP:-520} - ($(date +%s) - start) ))
fams="tests/data/stitch_problems/level3/1_LlamaDecodeStep.py benchmarks/real_models/hf_gpt2.py benchmarks/real_models/hf_bert.py benchmarks/real_models/hf_llama.py benchmarks/real_models/hf_mistral.py"
[ "$left" -gt 40 ] && timeout "$left" python3 benchmarks/l3program_speed.py $fams --jobs 5 \
  --runs 10 --compile --resume --json "$out/lm-bf16-compile.json" > "$out/lm-bf16-compile.txt" 2>&1
echo "families bf16 with compile rc=$? ($(since))"
grep -E "correct=|FAILED|not handled|geomean|Error|float64" "$out/lm-bf16-compile.txt" | cut -c1-260 | tail -n 12
