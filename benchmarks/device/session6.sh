#!/usr/bin/env bash
# seconds: 570
# Session 6, the call after the flash attention's first GPU check: the transformer language
# models and the decode step in bf16 at full size against all four baselines (eager, eager
# under a CUDA graph, torch.compile, reduce-overhead), then the whole real-model suite in bf16
# and fp32 against eager and eager under a CUDA graph (torch.compile's builds would not fit).
set -u
out="${AREA_OUT:-/tmp/session6-out}"
mkdir -p "$out"
start=$(date +%s)
export STITCH_MODEL_SIZE=full
lms="$(ls benchmarks/real_models/hf_*.py) tests/data/stitch_problems/level3/1_LlamaDecodeStep.py"
STITCH_MODEL_DTYPE=bfloat16 timeout 260 python3 benchmarks/l3program_speed.py $lms --jobs 8 \
  --runs 10 --compile --json "$out/lm-bf16-compile.json" > "$out/lm-bf16-compile.txt" 2>&1
echo "language models bf16 with compile rc=$? ($(( $(date +%s) - start )) s)"
grep -E "correct=|FAILED|not handled|geomean|Error|float64" "$out/lm-bf16-compile.txt" | cut -c1-260 | tail -n 24
files="$(ls benchmarks/real_models/[a-z]*.py) tests/data/stitch_problems/level3/1_LlamaDecodeStep.py"
. "$(dirname "$0")/_dtype_sweep.sh"
BUDGET=555 DTYPES="bfloat16 float32" dtype_sweep real 10 $files
