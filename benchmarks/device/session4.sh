#!/usr/bin/env bash
# seconds: 530
# After cuBLASLt's candidates are timed (templates.py, stitch_lt_plan): the builtin coder's GPU
# tests (level 3 op families and shrunk problems, whole programs, level 1/2 correctness), then
# the problems a GEMM of few rows touches, timed as generated, with replay forced and plain:
# HELDOUT (in HELDOUT_DIR), the level-3 dev problems DEV, and every level-2 dev problem
# (against round 2's figures in BENCHMARKS.md: did level 2 regress?).
set -u
out="${AREA_OUT:-/tmp/session4-out}"
mkdir -p "$out"
start=$(date +%s)
export TORCH_EXTENSIONS_DIR="${TORCH_EXTENSIONS_DIR:-/tmp/torch-ext}"
timeout 200 python3 -m pytest -m gpu tests/builtin/test_gpu_l3.py tests/builtin/test_gpu_program.py \
  tests/builtin/test_gpu_correctness.py -p no:cacheprovider -q -rA --durations=15 -W ignore \
  > "$out/pytest.txt" 2>&1
echo "pytest rc=$? ($(( $(date +%s) - start )) s)"
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest.txt" | tail -n 30
speed() {  # name folder only seconds
  local left=$(( 520 - ($(date +%s) - start) ))
  [ "$left" -gt "$4" ] && left=$4
  [ "$left" -gt 20 ] || { echo "$1 skipped"; return; }
  timeout "$left" python3 benchmarks/l3program_speed.py "$2" --only "$3" --runs 10 \
    --json "$out/$1.json" > "$out/$1.txt" 2>&1
  echo "$1 rc=$? ($(( $(date +%s) - start )) s)"
  grep -E "correct=|FAILED|not handled|geomean|rule chose" "$out/$1.txt"
}
speed heldout "${HELDOUT_DIR:-.heldout/level3}" "${HELDOUT:-34,11,12,29,32,46,47}" 130
speed level2 tests/data/kernelbench/level2 "${LEVEL2:-$(ls tests/data/kernelbench/level2 | grep -oE '^[0-9]+' | paste -sd,)}" 120
speed dev tests/data/kernelbench/level3 "${DEV:-1,2,3,5,28,31,43,44,50}" 100
