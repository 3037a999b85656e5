#!/usr/bin/env bash
# KernelBench's own harness (vendored, pinned: benchmarks/kernelbench/VENDORED.md) against our
# Verifier, on standalone copies of three builtin candidates (load_inline builds, no stitch_lsp
# import). One TORCH_EXTENSIONS_DIR: each copy is built once (45-60 s) and reused by both.
# Look for: every row "verdicts agree: True", speedup ratio (ours / KernelBench) near 1.
# seconds: 330
set -u
out="${AREA_OUT:-/tmp/results/kernelbench_eval}"
mkdir -p "$out"
export TORCH_EXTENSIONS_DIR="${TORCH_EXTENSIONS_DIR:-/tmp/stitch-torch-ext}"
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv > "$out/gpu.txt" 2>&1
python3 benchmarks/kernelbench_agreement.py \
  tests/data/kernelbench/level1/19_ReLU.py \
  tests/data/kernelbench/level1/23_Softmax.py \
  tests/data/kernelbench/level2/76_Gemm_Add_ReLU.py \
  --out "$out" > "$out/agreement.log" 2>&1
echo "rc=$?"
cat "$out/agreement.md" 2>/dev/null || tail -n 40 "$out/agreement.log"
