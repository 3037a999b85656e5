#!/usr/bin/env bash
# seconds: 560
# Session 10's second call: written-out attention as the flash kernel (attention_pattern.py) and
# the flash kernel's repeating mask on a GPU: its GPU tests, the attention tests, the Swin and
# T5 family tests; Swin-T in bf16 at full size; then the fp32 four-baseline table (every real
# model and the decode step against eager, eager under a CUDA graph, torch.compile and
# reduce-overhead) on what is left.
set -u
out="${AREA_OUT:-/tmp/session10b-out}"
mkdir -p "$out"
start=$(date +%s)
export CAP="${CAP:-555}"
. "$(dirname "$0")/_steps.sh"
gpu_tests 90 "$out/gpu-tests.txt" tests/builtin/test_attention_pattern.py \
  tests/builtin/test_attention.py tests/real_models/test_gpu_families.py -k "pattern or attention or swin or t5"
echo "gpu tests rc=$? ($(since))"
grep -E "^(FAILED|ERROR)|passed|failed" "$out/gpu-tests.txt" | cut -c1-250 | tail -n 12
grep -E "^E .*(Mismatch|Greatest|error|Error)" "$out/gpu-tests.txt" | cut -c1-250 | head -n 8
export STITCH_MODEL_SIZE=full
rm_=benchmarks/real_models
STITCH_MODEL_DTYPE=bfloat16 timeout "$(step 70)" python3 benchmarks/l3program_speed.py \
  $rm_/tv_swin_t.py --runs 10 --resume --json "$out/swin-bf16.json" > "$out/swin-bf16.txt" 2>&1
echo "swin bf16 rc=$? ($(since))"
grep -E "correct=|attention sites|FAILED|Error|float64" "$out/swin-bf16.txt" | cut -c1-300
files="$(ls $rm_/tv_*.py $rm_/timm_*.py $rm_/hf_*.py) tests/data/stitch_problems/level3/1_LlamaDecodeStep.py"
. "$(dirname "$0")/_dtype_sweep.sh"
left=$(( CAP - ($(date +%s) - start) ))
DTYPES=float32 BUDGET=$(( CAP - 5 )) dtype_sweep compile 10 $files \
  --compile --compile-jobs 8 --compile-warm-seconds $(( left / 2 ))
