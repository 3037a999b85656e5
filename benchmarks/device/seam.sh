#!/usr/bin/env bash
# seconds: 420
# GPU round for the worker seam: every worker now starts as `python3 -E -u -B -P -c BOOTSTRAP`
# (no PYTHONPATH, no working folder on sys.path; the repo and /tmp/site travel explicitly), GPUs
# come from one inventory, and the architecture from one policy. This runs what goes through them
# on a real GPU: the inventory itself, the Verifier's, the profiler's, the loop's and the builtin
# coder's GPU tests, the isolation tests (a hostile workspace, on a machine with a GPU), and the
# device tests of the inventory.
set -u
out="${AREA_OUT:?}"
start=$(date +%s)
export TORCH_EXTENSIONS_DIR=/tmp/torch-ext

python3 - > "$out/inventory.txt" 2>&1 <<'EOF'
import os
from stitch_lsp.gpus import build_arch, inventory
inv = inventory()
print("CUDA_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES"))
for g in inv.gpus:
    print(g.device, "physical", g.physical, g.name, g.compute_capability, g.arch, g.memory_mib)
print("problem", inv.problem)
print("build_arch", build_arch())
from stitch_lsp.workers.launch import worker_command
print("worker argv", worker_command(None, "stitch_lsp.verify.worker.main", ["REQ", "RES"])[:5])
EOF
cat "$out/inventory.txt"
nvidia-smi --query-gpu=index,uuid,name,compute_cap,memory.total --format=csv,noheader,nounits \
  > "$out/nvidia-smi.txt" 2>&1

timeout 300 python3 -m pytest -m gpu -p no:cacheprovider -q -rA \
  tests/verify/test_gpu.py tests/profile/test_gpu_profile.py tests/agents/test_gpu_loop.py \
  > "$out/pytest_gpu.txt" 2>&1
echo "pytest gpu rc=$? ($(( $(date +%s) - start )) s)"
grep -E "^(PASSED|FAILED|ERROR|SKIPPED)|passed|failed" "$out/pytest_gpu.txt" | tail -n 60

left=$(( 400 - ($(date +%s) - start) ))
if [ "$left" -gt 30 ]; then
  timeout "$left" python3 -m pytest -p no:cacheprovider -q -rA tests/server/test_devices.py \
    tests/security/test_worker_isolation.py -k "not show_profile" > "$out/pytest_seam.txt" 2>&1
  echo "pytest seam rc=$? ($(( $(date +%s) - start )) s)"
  grep -E "^(PASSED|FAILED|ERROR|SKIPPED)|passed|failed" "$out/pytest_seam.txt" | tail -n 30
fi
echo "== done ($(( $(date +%s) - start )) s)"
