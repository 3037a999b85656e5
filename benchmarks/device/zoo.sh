#!/usr/bin/env bash
# seconds: 560
# The model zoo (benchmarks/model_zoo.py: 78 library models the real-model suite does not hold)
# through benchmarks/l3program_speed.py, fp32 then bf16: generated in 12 processes, checked against
# eager at KernelBench's tolerance for the dtype (float64 distances on a miss), and timed against
# eager and eager under a CUDA graph. The models' small configs with their full inputs (8 images,
# 512 tokens): a correctness sweep of the CUDA the coder emits for models it was not tuned on.
set -u
out="${AREA_OUT:-/tmp/zoo-out}"
mkdir -p "$out"
start=$(date +%s)
zoo=/tmp/stitch-zoo
python3 benchmarks/model_zoo.py "$zoo" || exit 1
export STITCH_MODEL_SIZE=full
. "$(dirname "$0")/_dtype_sweep.sh"
dtype_sweep zoo 5 "$zoo"/${ZOO_PREFIX:-}*.py  # ZOO_PREFIX=hf_: only the transformers models
