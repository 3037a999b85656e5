#!/usr/bin/env bash
# seconds: 300
# GPU round for the hostile-input work: what the CLI prints on a machine with a GPU.
# 1. `verify` on a real pair prints its stages as they happen (static checks, import, build,
#    correctness, exploits, timing) on stderr, and one JSON object with `diagnostics` on stdout.
# 2. `generate --coder builtin --verify full --format json`: attempts print as
#    `attempt 1/N [draft] passed ...` (the stage literally), the run stops as target_met or
#    budget (never `compiled` with a GPU), the JSON has `diagnostics`.
# 3. A workers' Python without torch (python3 -S) on a GPU host: verify says torch is missing.
# 4. The hostile-input suite, fast cases, on a GPU host.
set -u
out="${AREA_OUT:?}"
start=$(date +%s)
data=tests/agents/data
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv > "$out/gpu.txt" 2>&1

timeout 150 python3 -m stitch_lsp verify "$data/scale_relu.py" "$data/scale_relu_candidate.py" \
  --format json > "$out/verify.json" 2> "$out/verify.stderr"
echo "verify rc=$? ($(( $(date +%s) - start )) s)"
echo "== verify stages"; grep "^verify: " "$out/verify.stderr"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('status', d['status'], 'speedup', d.get('speedup_vs_eager'), 'diagnostics', len(d['diagnostics']))" "$out/verify.json"

rm -f /tmp/hostile_gen.py
timeout 200 python3 -m stitch_lsp generate "$data/scale_relu.py" --coder builtin --verify full \
  -o /tmp/hostile_gen.py --trajectories-dir /tmp/hostile-traj --format json \
  > "$out/generate.json" 2> "$out/generate.stderr"
echo "generate rc=$? ($(( $(date +%s) - start )) s)"
echo "== generate attempts"; grep -E "^attempt |stitch-lsp generate" "$out/generate.stderr"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('stopped', d['stopped'], 'output', d['output'], 'diagnostics' in d, d.get('error'))" "$out/generate.json"

printf '#!/bin/sh\nexec python3 -S "$@"\n' > /tmp/python-no-torch && chmod +x /tmp/python-no-torch
STITCH_PYTHON_FOR_WORKERS=/tmp/python-no-torch timeout 120 python3 -m stitch_lsp verify \
  "$data/scale_relu.py" "$data/scale_relu_candidate.py" --format json \
  > "$out/notorch.json" 2> "$out/notorch.stderr"
echo "verify without torch rc=$?"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('status', d['status'], '|', d['message'])" "$out/notorch.json"

left=$(( 290 - ($(date +%s) - start) ))
[ "$left" -gt 30 ] && timeout "$left" python3 -m pytest tests/hostile -m "not slow" \
  -p no:cacheprovider -q -rfE > "$out/pytest.log" 2>&1
echo "pytest rc=$? ($(( $(date +%s) - start )) s)"
grep -E "passed|failed|event loop" "$out/pytest.log" | tail -n 5
echo "== done ($(( $(date +%s) - start )) s)"
