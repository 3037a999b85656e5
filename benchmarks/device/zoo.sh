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
for dtype in ${DTYPES:-float32 bfloat16}; do
  left=$(( ${BUDGET:-540} - ($(date +%s) - start) ))
  [ "$left" -gt 30 ] || { echo "$dtype skipped"; continue; }
  rm -f "$out/zoo-$dtype.json"
  for attempt in 1 2 3 4 5 6; do  # rc 3: a CUDA fault lost the context; go on in a new process
    left=$(( ${BUDGET:-540} - ($(date +%s) - start) ))
    [ "$left" -gt 20 ] || break
    STITCH_MODEL_DTYPE=$dtype timeout "$left" python3 benchmarks/l3program_speed.py "$zoo"/*.py \
      --jobs 12 --runs ${RUNS:-5} --resume --json "$out/zoo-$dtype.json" >> "$out/zoo-$dtype.txt" 2>&1
    rc=$?
    [ "$rc" = 3 ] || break
  done
  echo "$dtype rc=$rc ($(( $(date +%s) - start )) s)"
  grep -E "correct=|FAILED|not handled|geomean|Error|from float64" "$out/zoo-$dtype.txt" | cut -c1-230 | tail -n 40
done
