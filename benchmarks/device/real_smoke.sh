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
for dtype in ${DTYPES:-float32 bfloat16}; do
  left=$(( ${BUDGET:-540} - ($(date +%s) - start) ))
  [ "$left" -gt 30 ] || { echo "$dtype skipped"; continue; }
  rm -f "$out/real-$dtype.json"
  for attempt in 1 2 3 4 5 6; do  # rc 3: a CUDA fault lost the context; go on in a new process
    left=$(( ${BUDGET:-540} - ($(date +%s) - start) ))
    [ "$left" -gt 20 ] || break
    STITCH_MODEL_DTYPE=$dtype timeout "$left" python3 benchmarks/l3program_speed.py $files \
      --jobs 12 --runs ${RUNS:-10} --resume --json "$out/real-$dtype.json" >> "$out/real-$dtype.txt" 2>&1
    rc=$?
    [ "$rc" = 3 ] || break
  done
  echo "$dtype rc=$rc ($(( $(date +%s) - start )) s)"
  grep -E "correct=|FAILED|not handled|geomean|Error|from float64" "$out/real-$dtype.txt" | cut -c1-230 | tail -n 40
done
