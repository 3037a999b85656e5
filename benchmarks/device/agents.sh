#!/usr/bin/env bash
# seconds: 90
# The agent loop on a GPU: the whole loop through `stitch-lsp generate` (scripted Coder replies
# from a loopback endpoint, the real Planner and Verifier), the Planner's GPU profile, then, in
# the time left, the Planner's eager-vs-roofline table on a few KernelBench problems.
set -u
out="${AREA_OUT:-/tmp/agents-out}"
mkdir -p "$out"
start=$(date +%s)
export STITCH_ARTIFACTS_DIR="$out"  # the loop test keeps its result, prompts and trajectory here
python3 -m pytest -m gpu tests/agents -p no:cacheprovider -q -s -rs --junitxml="$out/junit.xml" \
  > "$out/pytest.txt" 2>&1
rc=$?
echo "pytest rc=$rc ($(( $(date +%s) - start )) s)"
grep -E "^(speedups|attempt|Timing|Profile|- profiler)|passed|failed|error" "$out/pytest.txt" | tail -n 16
shared="${STITCH_SHARED_DIR:-../shared}/kernelbench-dev"
left=$(( 82 - ($(date +%s) - start) ))
if [ -d "$shared" ] && [ "$left" -gt 12 ]; then
  timeout "$left" python3 benchmarks/planner_roofline.py --profile --json "$out/planner.json" \
    "$shared/level2/12_Gemm_Multiply_LeakyReLU.py" "$shared/level1/40_LayerNorm.py" \
    "$shared/level2/19_ConvTranspose2d_GELU_GroupNorm.py" "$shared/level1/23_Softmax.py" \
    2> "$out/planner.err" | tee "$out/planner.md"
fi
exit $rc
