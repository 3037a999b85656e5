#!/usr/bin/env bash
# seconds: 560
# The four-baseline table in bf16: every real model and the decode step at full size against
# eager, eager under a CUDA graph, torch.compile and reduce-overhead. torch.compile's builds run
# first in 6 processes (at most 240 s); what they did not reach, the timed run builds itself.
set -u
out="${AREA_OUT:-/tmp/session9b-out}"
mkdir -p "$out"
start=$(date +%s)
. "$(dirname "$0")/_steps.sh"
. "$(dirname "$0")/_dtype_sweep.sh"
export STITCH_MODEL_SIZE=full
DTYPES="${DTYPES:-bfloat16}" BUDGET="${BUDGET:-545}" dtype_sweep compile 10 \
  $(ls benchmarks/real_models/[a-z]*.py) tests/data/stitch_problems/level3/1_LlamaDecodeStep.py \
  --compile --compile-jobs 6 --compile-warm-seconds "${WARM:-240}"
