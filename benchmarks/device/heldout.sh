#!/usr/bin/env bash
# seconds: 560
# Level-3 problems kept outside this repository (HELDOUT_DIR, carried to the GPU machine as an
# ignored folder): each generated, checked against the eager reference and timed as generated,
# with replay forced and plain, beside eager and eager under a CUDA graph
# (benchmarks/l3program_speed.py), in chunks so that one slow problem cannot cost the others.
# Then, while time is left, the dev problems the same way (REPLAY_ONLY, default: all 22).
set -u
out="${AREA_OUT:-/tmp/heldout-out}"
mkdir -p "$out"
start=$(date +%s)
export TORCH_EXTENSIONS_DIR="${TORCH_EXTENSIONS_DIR:-/tmp/torch-ext}"
folder="${HELDOUT_DIR:-.heldout/level3}"
chunks="${HELDOUT_CHUNKS:-7,10,11,12,14,15,16 17,18,22,23,24,26,27 29,30,32,34,36,37,38 40,41,42,45,46,47,48}"
i=0
for chunk in $chunks; do
  i=$((i + 1))
  left=$(( ${HELDOUT_SECONDS:-330} - ($(date +%s) - start) ))
  [ "$left" -gt 20 ] || { echo "chunk $chunk skipped"; continue; }
  timeout "$left" python3 benchmarks/l3program_speed.py "$folder" --only "$chunk" --runs 10 \
    --json "$out/heldout_$i.json" > "$out/heldout_$i.txt" 2>&1
  echo "chunk $i ($chunk) rc=$? ($(( $(date +%s) - start )) s)"
  grep -E "correct=|FAILED|not handled|geomean|rule chose" "$out/heldout_$i.txt"
done
left=$(( 545 - ($(date +%s) - start) ))
if [ "$left" -gt 40 ]; then
  timeout "$left" python3 benchmarks/l3program_speed.py tests/data/kernelbench/level3 \
    --only "${REPLAY_ONLY:-1,2,3,4,5,6,8,9,13,19,20,21,25,28,31,33,35,39,43,44,49,50}" \
    --runs 10 --json "$out/dev.json" > "$out/dev.txt" 2>&1
  echo "dev rc=$? ($(( $(date +%s) - start )) s)"
  grep -E "correct=|FAILED|not handled|geomean|rule chose" "$out/dev.txt"
fi
