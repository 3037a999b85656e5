#!/usr/bin/env bash
# GPU round for the Verifier: GPU tests, then build-time and overhead figures.
# seconds: 150
set -u
out="${AREA_OUT:-/tmp/results/verify}"
mkdir -p "$out"
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv > "$out/gpu.txt" 2>&1
# fastcuda build times are measured alone; load_inline (about a minute by itself) and the
# verify-overhead run then overlap with the GPU tests.
python3 benchmarks/verify_build.py --skip-load-inline --skip-overhead --json "$out/build_fast.json" \
  > "$out/bench_fast.log" 2>&1
( python3 benchmarks/verify_build.py --cold 1 --warm 2 --skip-overhead --json "$out/build.json" \
    > "$out/bench_inline.log" 2>&1
  python3 benchmarks/verify_build.py --skip-load-inline --cold 1 --warm 1 --json "$out/overhead.json" \
    > "$out/bench_overhead.log" 2>&1 ) &
bench=$!
python3 -m pytest -m gpu tests/verify -p no:cacheprovider -q -rA > "$out/pytest.log" 2>&1
echo "== pytest"; grep -E "passed|failed|error|PASSED|FAILED|ERROR|SKIPPED" "$out/pytest.log" | tail -n 30
wait "$bench"
echo "== build"; tail -n 2 "$out/bench_fast.log" "$out/bench_inline.log" "$out/bench_overhead.log"
