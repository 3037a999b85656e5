#!/usr/bin/env bash
# seconds: 180
# Builtin coder on a GPU: correctness tests (odd sizes, every op family); the byte-floor ratio of
# the generated kernels on memory-bound level 1 problems; then `stitch-lsp bench` on a sample of
# level 2 through the Verifier. BUILTIN_ONLY picks the level 2 problems.
set -u
out="${AREA_OUT:-/tmp/builtin-out}"
mkdir -p "$out"
start=$(date +%s)
shared="${STITCH_SHARED_DIR:-shared}"
ls /usr/local/cuda/include/cublas_v2.h /usr/local/cuda/include/cublasLt.h 2>&1 | tee "$out/cublas.txt"
python3 -m pytest -m gpu tests/builtin -p no:cacheprovider -q -rs --junitxml="$out/junit.xml" \
  > "$out/pytest.txt" 2>&1
echo "pytest rc=$? ($(( $(date +%s) - start )) s)"
tail -n 30 "$out/pytest.txt"
if [ -d "$shared/kernelbench-dev" ]; then
  timeout 60 python3 benchmarks/builtin_floor.py "$shared/kernelbench-dev/level1" \
    --json "$out/floor_level1.json" > "$out/floor.txt" 2>&1
  echo "floor rc=$? ($(( $(date +%s) - start )) s)"
  cat "$out/floor.txt" | grep -v Warning | tail -n 15
fi
left=$(( 170 - ($(date +%s) - start) ))
only="${BUILTIN_ONLY:-99,19,33}"
if [ "$left" -gt 30 ] && [ -d "$shared/kernelbench-dev" ]; then
  timeout "$left" python3 -m stitch_lsp bench "$shared/kernelbench-dev" --level 2 --only "$only" \
    --json "$out/bench_level2.json" --out "$out/candidates" > "$out/bench.txt" 2>&1
  echo "bench rc=$? ($(( $(date +%s) - start )) s)"
  tail -n 20 "$out/bench.txt"
else
  echo "bench skipped (left ${left}s, shared=$shared)"
fi
