#!/usr/bin/env bash
# seconds: 540
# Every GPU test in the repository except the adversarial suite (it has its own round,
# adversarial.sh): the Verifier, profiler, loop, step-by-step, builtin coder and level-3 tests,
# with the 40 slowest listed so the next round can be split well.
set -u
out="${AREA_OUT:-/tmp/gpu-suite-out}"
mkdir -p "$out"
start=$(date +%s)
export TORCH_EXTENSIONS_DIR="${TORCH_EXTENSIONS_DIR:-/tmp/torch-ext}"
# Only the files that hold GPU tests: the others need client libraries the GPU host lacks.
files=$(grep -rl --include='test_*.py' "mark.gpu" tests | grep -v '^tests/adversarial/' | sort)
timeout 520 python3 -m pytest -m gpu $files -p no:cacheprovider -q -rA \
  --durations=40 --junitxml="$out/junit.xml" -W ignore > "$out/pytest.txt" 2>&1
rc=$?
echo "pytest rc=$rc ($(( $(date +%s) - start )) s)"
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest.txt" | tail -n 40
exit $rc
