#!/usr/bin/env bash
# seconds: 540
# Session 8: the GPU tests of the real-model families again (session 7's arena fix for Swin,
# MobileViT and Phi has not run on a GPU) and the flash kernel's tests, where GPT-2 and the
# decode step spend their GPU time against eager (they trail reduce-overhead), attention alone
# against eager sdpa, then the real-model suite in bf16 and fp32 against eager and eager under
# a CUDA graph (its language models now with their masks folded into is_causal).
set -u
out="${AREA_OUT:-/tmp/session8-out}"
mkdir -p "$out"
start=$(date +%s)
. "$(dirname "$0")/_steps.sh"
gpu_tests 100 "$out/gpu-tests.txt" tests/real_models/test_gpu_families.py \
  tests/builtin/test_attention.py
echo "families and attention tests rc=$? ($(since))"
grep -E "^(PASSED|FAILED|ERROR)|passed|failed" "$out/gpu-tests.txt" | cut -c1-250 | tail -n 40
grep -E "^E  .*(step|diff|tolerance)" "$out/gpu-tests.txt" | cut -c1-250 | head -n 10
STITCH_MODEL_SIZE=full STITCH_MODEL_DTYPE=bfloat16 timeout "$(step 80)" python3 \
  benchmarks/kernel_profile.py benchmarks/real_models/hf_gpt2.py \
  tests/data/stitch_problems/level3/1_LlamaDecodeStep.py --top 12 > "$out/profile.txt" 2>&1
echo "kernel profile rc=$? ($(since))"
cat "$out/profile.txt" | cut -c1-200 | tail -n 70
timeout "$(step 40)" python3 benchmarks/l3program_speed.py benchmarks/attention/*.py --jobs 4 \
  --runs 20 --json "$out/attention.json" > "$out/attention-speed.txt" 2>&1
echo "attention alone rc=$? ($(since))"
grep -E "correct=|geomean" "$out/attention-speed.txt" | cut -c1-250 | tail -n 8
export STITCH_MODEL_SIZE=full
files="$(ls benchmarks/real_models/[a-z]*.py) tests/data/stitch_problems/level3/1_LlamaDecodeStep.py"
. "$(dirname "$0")/_dtype_sweep.sh"
BUDGET=${CAP:-530} DTYPES="bfloat16 float32" dtype_sweep real 10 $files
