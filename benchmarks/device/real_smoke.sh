#!/usr/bin/env bash
# seconds: 560
# The real-model suite (benchmarks/real_models/ and the Llama decode step) at full size, fp32
# then bf16, through benchmarks/l3program_speed.py: generated in 12 processes, checked against
# eager at KernelBench's tolerance for the dtype, and timed against eager and eager under a CUDA
# graph (median of 10, L2 flushed). No torch.compile here (its builds would not fit).
set -u
out="${AREA_OUT:-/tmp/real-smoke-out}"
mkdir -p "$out"
start=$(date +%s)
files="$(ls benchmarks/real_models/[a-z]*.py) tests/data/stitch_problems/level3/1_LlamaDecodeStep.py"
export STITCH_MODEL_SIZE=full
. "$(dirname "$0")/_dtype_sweep.sh"
dtype_sweep real 10 $files
