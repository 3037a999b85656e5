#!/usr/bin/env bash
# seconds: 420
# Step-by-step generation on a GPU: `stitch-lsp generate` with scripted Coder replies that are
# real partial programs (tests/agents/test_gpu_steps.py): mlp3 (three subtasks, a build error
# repaired inside subtask 2, the stitch step with ncu feedback, one optimization) and
# conv3_cumsum (the builtin generator seeds two groups, the scripted Coder writes the third).
# Each run's result, prompts and trajectory are kept in $AREA_OUT.
set -u
out="${AREA_OUT:-/tmp/steps-out}"
mkdir -p "$out"
start=$(date +%s)
export STITCH_ARTIFACTS_DIR="$out"
timeout 400 python3 -m pytest -m gpu tests/agents/test_gpu_steps.py -p no:cacheprovider -q -s -rA \
  --junitxml="$out/junit.xml" > "$out/pytest.txt" 2>&1
rc=$?
echo "pytest rc=$rc ($(( $(date +%s) - start )) s)"
grep -E "^(speedups|attempt|  [0-9]/[0-9])|subtasks|PASSED|FAILED|passed|failed|error" "$out/pytest.txt" | tail -n 40
exit $rc
