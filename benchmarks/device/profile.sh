#!/usr/bin/env bash
# GPU round for the profiler: collect small ncu report fixtures from examples/kernels, run the
# GPU tests, and time "profile" -> diagnostics with the default sections against --set full.
# seconds: 150
set -u
out="${AREA_OUT:?}"
mkdir -p "$out/fixtures" "$out/bench" "$out/cli"
ncu --version | tail -1
python3 -c "import ncu_report, pydantic; print('deps ok')" || exit 1
sections=(--section SpeedOfLight --section Occupancy --section LaunchStats
          --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section SourceCounters)
# 1. Fixtures: default sections, one launch each, sources imported.
for pair in uncoalesced:transpose_naive bank_conflicts:transpose_tiled_conflicts register_limited:many_accumulators; do
  name="${pair%%:*}"; kernel="${pair##*:}"
  t0=$SECONDS
  nvcc -O3 -lineinfo -arch=sm_90a -o "/tmp/profile_$name" "examples/kernels/profile_$name.cu" || continue
  timeout 40 ncu --clock-control none --import-source yes "${sections[@]}" -k "regex:^${kernel}\$" -c 1 \
    -f -o "$out/fixtures/profile_$name" "/tmp/profile_$name" > "$out/fixtures/profile_$name.log" 2>&1
  echo "fixture $name rc=$? $((SECONDS - t0)) s"
done
ls -la "$out/fixtures"
# 2. Benchmark through the real server: "profile" -> published ncu diagnostics, one kernel,
#    default sections, then --set full, then the cached repeat.
timeout 50 python3 benchmarks/profile_lsp_wall.py examples/kernels/profile_uncoalesced.cu \
  --out "$out/bench/profile_lsp_wall.json" 2> "$out/bench/profile_lsp_wall.err"; echo "bench rc=$?"
# 3. GPU tests (the .py one builds a load_inline extension: slow, so it runs last); they keep
#    their reports, which gives the embedded-CUDA fixture.
export TORCH_EXTENSIONS_DIR=/tmp/torch-ext STITCH_PROFILE_REPORT_DIR="$out/cli"
timeout 110 python3 -m pytest -m gpu tests/profile/test_gpu_profile.py -p no:cacheprovider -q -rs > "$out/pytest_gpu.txt" 2>&1
echo "pytest rc=$?"; tail -30 "$out/pytest_gpu.txt"
echo "summary:"; python3 -c "import json,sys; [print(json.dumps(r)) for r in json.load(open(sys.argv[1]))['runs']]" "$out/bench/profile_lsp_wall.json"
