#!/usr/bin/env bash
# seconds: 540
# GPU tests of the areas the sandbox touches (the Verifier, the profiler, the builtin programs,
# the agents' loop), every worker inside bubblewrap; then the sandbox tests themselves.
set -u
out="${AREA_OUT:?}"
if [ -z "${STITCH_BWRAP:-}" ] && ! command -v bwrap >/dev/null 2>&1 && [ -x .bwrap/bwrap ]; then
  export STITCH_BWRAP="$PWD/.bwrap/bwrap"
fi
timeout 60 python3 -m pytest tests/security/test_sandbox.py tests/security/test_sandbox_gpu.py \
  -p no:cacheprovider -q -rA > "$out/sandbox_tests.log" 2>&1
echo "sandbox tests rc=$?"; tail -n 5 "$out/sandbox_tests.log"
timeout 450 python3 -m pytest -m gpu tests/verify tests/profile tests/agents tests/export \
  tests/builtin/test_gpu_program.py -p no:cacheprovider -q -rA  \
  > "$out/gpu_tests.log" 2>&1 || true
tail -n 30 "$out/gpu_tests.log"
