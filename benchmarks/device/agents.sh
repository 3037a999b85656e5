#!/usr/bin/env bash
# seconds: 90
# The agent loop on a GPU: the Planner's profile of a reference, then the whole loop (scripted
# Coder replies from a loopback endpoint, the real Verifier) through `stitch-lsp generate`.
set -u
out="${AREA_OUT:-/tmp/agents-out}"
mkdir -p "$out"
start=$(date +%s)
python3 -m pytest -m gpu tests/agents -p no:cacheprovider -q -s -rs --junitxml="$out/junit.xml" \
  > "$out/pytest.txt" 2>&1
rc=$?
echo "pytest rc=$rc ($(( $(date +%s) - start )) s)"
shared="${STITCH_SHARED_DIR:-../shared}"
if [ -d "$shared/kernelbench-dev" ]; then
  for p in level1/19_ReLU.py level1/23_Softmax.py level2/12_Gemm_Multiply_LeakyReLU.py; do
    [ $(( $(date +%s) - start )) -lt 70 ] || break
    name="$(basename "$p" .py)"
    timeout 20 python3 -m stitch_lsp.agents.planner_worker "$shared/kernelbench-dev/$p" \
      --profile --out "$out/plan_$name.json" 2> "$out/plan_$name.err" || echo "planner $name failed"
    python3 - "$out/plan_$name.json" <<'PY' 2>/dev/null || true
import json, sys
a = json.load(open(sys.argv[1]))
print(f"{a['module']}: eager {a['eager_ms']} ms, fused floor {a['fused_floor_ms']:.3f} ms, "
      f"unfused floor {a['unfused_floor_ms']:.3f} ms on {a['hardware']['name']}")
PY
  done
fi
tail -n 15 "$out/pytest.txt"
exit $rc
