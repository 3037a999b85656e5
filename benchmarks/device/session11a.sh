#!/usr/bin/env bash
# seconds: 560
# For the session after 10: what session 10 left untimed on a GPU.
# 1. GPU tests: GEMMs with a misaligned n padded in B and C (test_gemm_padding.py), T5's
#    encoder in bf16 under the revised bf16 rule, and the CNN families in bf16 with
#    STITCH_CHANNELS_LAST_HALF=1 (whole bf16 CNNs channels-last).
# 2. (session 11: also the cube for x**3 and the copy-free sdpa path) GPT-2 in bf16 at full size against the four baselines, and its kernel profile: does the
#    head leave the align-1 kernel?
# 3. Level-2 dev problems slower than torch.compile (37, 41, 45): the three sides' kernels.
# 4. bf16 CNNs at full size without and with STITCH_CHANNELS_LAST_HALF=1 (same call, same
#    machine): ResNet-50, EfficientNet-B0, MobileNetV3, RegNet, DenseNet.
set -u
out="${AREA_OUT:-/tmp/session11a-out}"
mkdir -p "$out"
start=$(date +%s)
export CAP="${CAP:-555}"
. "$(dirname "$0")/_steps.sh"
gpu_tests 100 "$out/gpu-tests.txt" tests/builtin/test_gemm_padding.py \
  tests/builtin/test_attention.py tests/builtin/test_attention_choice.py \
  tests/verify/test_algebra_floor.py tests/real_models/test_gpu_families.py \
  -k "padded or paths or choice or sum_over_linear or (t5 and bfloat16)"
echo "gpu tests rc=$? ($(since))"
STITCH_CHANNELS_LAST_HALF=1 gpu_tests 60 "$out/gpu-tests-cl.txt" \
  tests/real_models/test_gpu_families.py -k "bfloat16 and (resnet18 or mobilevit or convnext)"
echo "gpu tests (channels-last) rc=$? ($(since))"
grep -hE "^(FAILED|ERROR)|passed|failed" "$out"/gpu-tests*.txt | cut -c1-250 | tail -n 12
export STITCH_MODEL_SIZE=full
rm_=benchmarks/real_models
STITCH_MODEL_DTYPE=bfloat16 timeout "$(step 90)" python3 benchmarks/kernel_profile.py \
  $rm_/hf_gpt2.py $rm_/timm_vit_small.py --top 10 > "$out/profile-gpt2.txt" 2>&1
echo "profile rc=$? ($(since))"
grep -vE "Warning|warn" "$out/profile-gpt2.txt" | cut -c1-160 | head -n 48
timeout "$(step 120)" python3 benchmarks/kernel_profile.py tests/data/kernelbench/level2 \
  --only 37,41,45 --compile --top 6 > "$out/profile-level2.txt" 2>&1
echo "level-2 profile rc=$? ($(since))"
grep -vE "Warning|warn" "$out/profile-level2.txt" | cut -c1-160 | head -n 60
cnns="$rm_/tv_resnet50.py $rm_/timm_efficientnet_b0.py $rm_/tv_mobilenet_v3_small.py \
  $rm_/tv_regnet_y_400mf.py $rm_/tv_densenet121.py"
STITCH_MODEL_DTYPE=bfloat16 timeout "$(step 110)" python3 benchmarks/l3program_speed.py $cnns \
  --jobs 6 --runs 10 --resume --json "$out/cnn-nchw.json" > "$out/cnn-nchw.txt" 2>&1
echo "cnn nchw rc=$? ($(since))"
STITCH_CHANNELS_LAST_HALF=1 STITCH_MODEL_DTYPE=bfloat16 timeout "$(step 110)" \
  python3 benchmarks/l3program_speed.py $cnns --jobs 6 --runs 10 --resume \
  --json "$out/cnn-nhwc.json" > "$out/cnn-nhwc.txt" 2>&1
echo "cnn nhwc rc=$? ($(since))"
grep -hE "correct=|FAILED|Error" "$out"/cnn-*.txt | cut -c1-260
STITCH_MODEL_DTYPE=bfloat16 timeout "$(step 150)" python3 benchmarks/l3program_speed.py \
  $rm_/hf_gpt2.py --runs 10 --compile --json "$out/gpt2.json" > "$out/gpt2.txt" 2>&1
echo "gpt2 rc=$? ($(since))"
grep -E "correct=|Error" "$out/gpt2.txt" | cut -c1-300
