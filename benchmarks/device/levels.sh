#!/usr/bin/env bash
# seconds: 570
# The level-2 (30) and level-3 (22) dev problems through benchmarks/l3program_speed.py: each
# generated, checked against eager (atol = rtol = 1e-4) and timed as generated, with replay
# forced and plain, beside eager and eager under a CUDA graph (median of 10, L2 flushed).
set -u
out="${AREA_OUT:-/tmp/levels-out}"
mkdir -p "$out"
start=$(date +%s)
export TORCH_EXTENSIONS_DIR="${TORCH_EXTENSIONS_DIR:-/tmp/torch-ext}"
for level in ${LEVELS:-2 3}; do
  left=$(( 555 - ($(date +%s) - start) ))
  [ "$left" -gt 30 ] || { echo "level $level skipped"; continue; }
  timeout "$left" python3 benchmarks/l3program_speed.py "tests/data/kernelbench/level$level" \
    --runs 10 --json "$out/level$level.json" > "$out/level$level.txt" 2>&1
  echo "level $level rc=$? ($(( $(date +%s) - start )) s)"
  grep -E "correct=|FAILED|not handled|geomean|rule chose" "$out/level$level.txt" | tail -n 60
done
