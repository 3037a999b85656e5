#!/usr/bin/env bash
# seconds: 170
# cuBLASLt candidates replace the heuristic's first only when clearly faster: the MLPs (where
# the apparent fastest was slower) and the unrolled RNN cell (where it was 4x faster), timed as
# generated, with replay forced and plain.
set -u
out="${AREA_OUT:-/tmp/lt-check-out}"
mkdir -p "$out"
start=$(date +%s)
timeout 60 python3 benchmarks/l3program_speed.py tests/data/kernelbench/level3 --only 1,2,3 \
  --runs 10 --json "$out/dev.json" > "$out/dev.txt" 2>&1
echo "dev rc=$? ($(( $(date +%s) - start )) s)"; grep -E "correct=|FAILED" "$out/dev.txt"
timeout 100 python3 benchmarks/l3program_speed.py "${HELDOUT_DIR:-.heldout/level3}" --only 34 \
  --runs 10 --json "$out/heldout.json" > "$out/heldout.txt" 2>&1
echo "heldout rc=$? ($(( $(date +%s) - start )) s)"; grep -E "correct=|FAILED" "$out/heldout.txt"
