#!/usr/bin/env bash
# seconds: 200
# The shortest round that checks this session's GPU-facing changes, for a call with little device
# time: the programs the algebra shortens with their weights prepared and changed twice
# (test_gpu_algebra.py), and the families whose q, k, v GEMMs are merged, with BERT's merged bias
# epilogue and the decode step's residual-as-bias epilogue (test_gpu_families.py).
set -u
out="${AREA_OUT:-/tmp/session13c-out}"
mkdir -p "$out"
start=$(date +%s)
export CAP="${CAP:-195}"
. "$(dirname "$0")/_steps.sh"
gpu_tests 190 "$out/gpu-tests-merged.txt" tests/builtin/test_gpu_algebra.py \
  tests/real_models/test_gpu_families.py -k "rewritten or decode or bert"
echo "gpu tests (algebra, merged GEMMs) rc=$? ($(since))"
grep -hE "^(FAILED|ERROR|PASSED)|passed|failed" "$out"/gpu-tests*.txt | cut -c1-250 | tail -n 20
