#!/usr/bin/env bash
# seconds: 330
# The builtin coder's GPU tests (tests/builtin) and the real-model families in fp32 and bf16,
# with the decode step (tests/real_models/test_gpu_families.py).
set -u
out="${AREA_OUT:-/tmp/families-out}"
mkdir -p "$out"
start=$(date +%s)
files=$(grep -l "mark.gpu" ${FAMILIES_TESTS:-tests/builtin/test_*.py tests/real_models/test_*.py} | sort)
timeout "${FAMILIES_SECONDS:-300}" python3 -m pytest -m gpu $files -p no:cacheprovider -q -rA --durations=15 \
  --junitxml="$out/junit.xml" -W ignore > "$out/pytest.txt" 2>&1
rc=$?
echo "pytest rc=$rc ($(( $(date +%s) - start )) s)"
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest.txt" | cut -c1-300 | tail -n 40
exit $rc
