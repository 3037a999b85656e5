#!/usr/bin/env bash
# GPU tests of the editor work: a standalone copy (load_inline, no stitch_lsp import) passes our
# Verifier, and the profile job profiles a candidate's reference too (the results roofline).
# Look for: 2 passed.
# seconds: 300
set -u
out="${AREA_OUT:-/tmp/results/editor}"
mkdir -p "$out"
export TORCH_EXTENSIONS_DIR="${TORCH_EXTENSIONS_DIR:-/tmp/stitch-torch-ext}"
python3 -m pytest -m gpu -p no:cacheprovider -q -rA \
  tests/export/test_gpu_standalone.py tests/profile/test_gpu_reference_profile.py \
  > "$out/pytest.log" 2>&1
echo "== pytest"; grep -E "passed|failed|error|FAILED|ERROR|SKIPPED" "$out/pytest.log" | tail -n 20
