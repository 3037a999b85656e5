#!/usr/bin/env bash
# seconds: 300
# GPU tests with every worker inside bubblewrap: the sandbox's own (tests/security), then
# SANDBOX_GPU_TESTS (other GPU test paths, when the round has time for them).
set -u
out="${AREA_OUT:?}"
if [ -z "${STITCH_BWRAP:-}" ] && ! command -v bwrap >/dev/null 2>&1 && [ -x .bwrap/bwrap ]; then
  export STITCH_BWRAP="$PWD/.bwrap/bwrap"
fi
timeout 200 python3 -m pytest tests/security/test_sandbox.py tests/security/test_sandbox_gpu.py \
  -p no:cacheprovider -q -rA > "$out/sandbox_tests.log" 2>&1
echo "sandbox tests rc=$?"; grep -E "^(PASSED|FAILED|SKIPPED|ERROR)|passed|failed" "$out/sandbox_tests.log" | tail -n 40
if [ -n "${SANDBOX_GPU_TESTS:-}" ]; then
  timeout 90 python3 -m pytest -m gpu $SANDBOX_GPU_TESTS -p no:cacheprovider -q -rA \
    > "$out/gpu_tests.log" 2>&1
  echo "gpu tests rc=$?"; tail -n 30 "$out/gpu_tests.log"
fi
