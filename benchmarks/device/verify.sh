#!/usr/bin/env bash
# GPU round for the Verifier: build-time figures (alone, so nothing else competes for the CPU),
# the GPU tests, then the verify-overhead figure.
# seconds: 150
set -u
out="${AREA_OUT:-/tmp/results/verify}"
mkdir -p "$out"
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv > "$out/gpu.txt" 2>&1
python3 benchmarks/verify_build.py --cold 3 --warm 10 --skip-overhead --json "$out/build.json" \
  > "$out/bench_build.log" 2>&1
python3 -m pytest -m gpu tests/verify -p no:cacheprovider -q -rA > "$out/pytest.log" 2>&1
python3 benchmarks/verify_build.py --cold 1 --warm 1 --skip-load-inline \
--json "$out/overhead.json" > "$out/bench_overhead.log" 2>&1
echo "== pytest"; grep -E "passed|failed|error|FAILED|ERROR|SKIPPED" "$out/pytest.log" | tail -n 30
echo "== build"; tail -n 1 "$out/bench_build.log"
echo "== overhead"; cut -c1-400 "$out/bench_overhead.log" | grep -E "^verify"
