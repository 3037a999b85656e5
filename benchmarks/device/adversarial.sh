#!/usr/bin/env bash
# GPU round for the adversarial suite (tests/adversarial/test_gpu.py):
# - every honest candidate passes the Verifier and reports its own-kernel share (attribution);
# - every candidate marked dynamic or both ends as exploit or incorrect, the `both` ones with
#   the static checks skipped;
# - the heavy op left in cuBLAS/cuDNN/PyTorch is stopped by attribution, patched harness
#   globals by the harness snapshot, a call-stack trick by the timed-run check, outputs below
#   atol by the scaled comparison;
# - the builtin coder's programs (a GEMM and convolutions with fused epilogues, an MLP, and
#   KernelBench level 2 problem 11 at full size) pass with no exploit and report their share.
# Run it with: bash benchmarks/device/round.sh adversarial   (results in $OUT/adversarial.tgz)
# seconds: 470
set -u
out="${AREA_OUT:-/tmp/results/adversarial}"
mkdir -p "$out"
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv > "$out/gpu.txt" 2>&1
# The project's addopts may name pytest-xdist, which the device's Python may lack: override.
AREA_OUT="$out" timeout -k 5 440 python3 -m pytest -m gpu tests/adversarial/test_gpu.py \
  -p no:cacheprovider -o addopts="--import-mode=importlib" -q -rA > "$out/pytest.log" 2>&1
echo "pytest rc=$?"
echo "== pytest"
grep -E "^(PASSED|FAILED|ERROR)|passed|failed|error" "$out/pytest.log" | tail -n 120
echo "== verdicts (status, custom share, exploits)"
python3 - "$out/adversarial" <<'EOF'
import json
import sys
from pathlib import Path

for path in sorted(Path(sys.argv[1]).glob("*.json")):
    r = json.loads(path.read_text())
    a = r.get("attribution") or {}
    own = f"{a['own']:.0%}" if a.get("gpu_ms") else "-"
    heavy = a.get("heavy_alone") or ""
    codes = ",".join(e["code"].rsplit(".", 1)[-1] for e in r.get("exploits", []))
    print(f"{path.stem:55} {r['status']:14} own {own:>5} {heavy:5} {codes}")
EOF
