#!/usr/bin/env bash
# GPU round for the adversarial suite: every honest candidate must pass the Verifier, every
# candidate that only execution can expose must end as exploit or incorrect.
# seconds: 590
set -u
out="${AREA_OUT:-/tmp/results/adversarial}"
mkdir -p "$out"
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv > "$out/gpu.txt" 2>&1
AREA_OUT="$out" python3 -m pytest -m gpu tests/adversarial -p no:cacheprovider -q -rA \
  > "$out/pytest.log" 2>&1
echo "== pytest"; grep -E "passed|failed|error|FAILED|ERROR" "$out/pytest.log" | tail -n 60
