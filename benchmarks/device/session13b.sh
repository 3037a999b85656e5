#!/usr/bin/env bash
# seconds: 560
# The rest of what session 12 could not run: ViT-S and ViT-B/16 in bf16 against the four
# baselines (the attention choice now times GPU work only: does it keep sdpa?), then the
# builtin coder's program and correctness GPU files with the time they need.
set -u
out="${AREA_OUT:-/tmp/session13b-out}"
mkdir -p "$out"
start=$(date +%s)
export CAP="${CAP:-555}"
. "$(dirname "$0")/_steps.sh"
rm_=benchmarks/real_models
STITCH_MODEL_SIZE=full STITCH_MODEL_DTYPE=bfloat16 timeout "$(step 200)" \
  python3 benchmarks/l3program_speed.py $rm_/timm_vit_small.py $rm_/tv_vit_b_16.py --jobs 2 \
  --runs 10 --compile --compile-jobs 2 --json "$out/vit.json" > "$out/vit.txt" 2>&1
echo "vit rc=$? ($(since))"
grep -E "correct=|sdpa at|Error" "$out/vit.txt" | cut -c1-300
export STITCH_MODEL_SIZE=full
# Mixtral and Qwen2-MoE in fp32 (captured since session 12; their experts call torch._grouped_mm
# in float32, which eager itself must run on this GPU for the problem to be valid)
if python3 -c "import transformers" 2>/dev/null; then
  python3 benchmarks/model_zoo.py /tmp/zoo > /dev/null
  timeout "$(step 90)" python3 benchmarks/l3program_speed.py /tmp/zoo/hf_mixtral.py \
    /tmp/zoo/hf_qwen2moe.py --jobs 2 --runs 10 --json "$out/moe-fp32.json" > "$out/moe-fp32.txt" 2>&1
  echo "moe fp32 rc=$? ($(since))"
  grep -E "correct=|Error" "$out/moe-fp32.txt" | cut -c1-300
fi
unset STITCH_MODEL_SIZE
gpu_tests 330 "$out/gpu-tests-builtin.txt" tests/builtin/test_gpu_program.py \
  tests/builtin/test_gpu_correctness.py
echo "gpu tests (builtin) rc=$? ($(since))"
grep -hE "^(FAILED|ERROR)|passed|failed" "$out"/gpu-tests*.txt | cut -c1-250 | tail -n 14
