#!/usr/bin/env bash
# seconds: 420
# The four-baseline table in bf16: every real model and the decode step at full size against
# eager, eager under a CUDA graph, torch.compile and reduce-overhead, vision models first.
# torch.compile's builds run first in 8 processes (at most $WARM s); what they did not reach,
# the timed run builds itself. Rows are kept as they come (--resume), so a cut run keeps them.
set -u
out="${AREA_OUT:-/tmp/session9b-out}"
mkdir -p "$out"
start=$(date +%s)
. "$(dirname "$0")/_steps.sh"
. "$(dirname "$0")/_dtype_sweep.sh"
export STITCH_MODEL_SIZE=full
rm_=benchmarks/real_models
files="$(ls $rm_/tv_*.py $rm_/timm_*.py $rm_/hf_*.py) tests/data/stitch_problems/level3/1_LlamaDecodeStep.py"
DTYPES="${DTYPES:-bfloat16}" BUDGET="${BUDGET:-410}" dtype_sweep compile 10 $files \
  --compile --compile-jobs 8 --compile-warm-seconds "${WARM:-200}"
