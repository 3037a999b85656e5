#!/usr/bin/env bash
# GPU round for the profiler. Round 1 collected tests/fixtures/ncu/ (see its README) and timed
# "profile" -> published diagnostics. This round: the GPU tests, what each section set costs
# (replay passes and time), and a profile of a KernelBench reference Model (library kernels).
# seconds: 150
set -u
out="${AREA_OUT:?}"
mkdir -p "$out/bench" "$out/cli" "$out/model"
ncu --version | tail -1
python3 -c "import ncu_report, pydantic; print('deps ok')" || exit 1
export TORCH_EXTENSIONS_DIR=/tmp/torch-ext STITCH_PROFILE_REPORT_DIR="$out/cli"
shared="${STITCH_SHARED_DIR:-../shared}"
# 1. GPU test: profile the .cu example end to end (build, ncu, read, map).
timeout 30 python3 -m pytest -m gpu tests/profile/test_gpu_profile.py -k cu_example \
  -p no:cacheprovider -q -rs > "$out/pytest_gpu_cu.txt" 2>&1
echo "pytest cu rc=$?"; tail -3 "$out/pytest_gpu_cu.txt"
# 2. Cost of each section set for one kernel: passes, ncu seconds, findings.
timeout 40 python3 benchmarks/profile_sections.py examples/kernels/profile_uncoalesced.cu \
  --out "$out/bench/profile_sections.json" --report-dir /tmp/profile-sections; echo "sections rc=$?"
# 3. Any module: a KernelBench reference (cuBLAS GEMM + torch elementwise), no kernel filter.
t0=$SECONDS
timeout 40 python3 -m stitch_lsp profile "$shared/kernelbench-dev/level2/12_Gemm_Multiply_LeakyReLU.py" \
  --class Model --json --report-dir "$out/model" > "$out/model/gemm.json" 2> "$out/model/gemm.err"
echo "model rc=$? $((SECONDS - t0)) s"
python3 -c "
import json,sys
d=json.load(open(sys.argv[1]))
print('ok', d['ok'], d.get('error'), 'wall', d.get('wall_s'), 'ncu', d.get('ncu_s'), 'build', d.get('build_s'))
for k in d['kernels']: print(k['name'][:60], k['duration_us'], k['bottleneck'], k['line'])
print(len(d['diagnostics']), 'diagnostics on lines', sorted({x['line'] for x in d['diagnostics']}))
" "$out/model/gemm.json" 2>&1 | head -20
# 4. GPU test: the load_inline example (builds a torch extension, about 65 s), last.
timeout 110 python3 -m pytest -m gpu tests/profile/test_gpu_profile.py -k python_example \
  -p no:cacheprovider -q -rs > "$out/pytest_gpu_py.txt" 2>&1
echo "pytest py rc=$?"; tail -5 "$out/pytest_gpu_py.txt"
