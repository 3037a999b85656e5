#!/usr/bin/env bash
# seconds: 560
# torch.compile comparison for the level 2 problems no earlier round ran through the Verifier,
# and the tolerance probe for 14_Gemm_Divide_Sum_Scaling (how far the fp32 reference, torch.compile
# and the builtin candidate are from a float64 answer).
set -u
out="${AREA_OUT:-/tmp/compile-out}"
mkdir -p "$out"
start=$(date +%s)
kb="${STITCH_SHARED_DIR:-shared}/kernelbench-dev"
timeout 120 python3 benchmarks/tolerance_probe.py "$kb"/level2/14_*.py --trials 5 \
  --json "$out/tolerance_14.json" > "$out/tolerance.txt" 2>&1
echo "probe rc=$? ($(( $(date +%s) - start )) s)"
grep -v -i warn "$out/tolerance.txt" | tail -n 8
left=$(( 550 - ($(date +%s) - start) ))
timeout "$left" python3 -m stitch_lsp bench "$kb" --level 2 \
  --only "${COMPILE_BENCH:-9,29,37,40,45,53,56,59,63,70,81,86,95}" \
  --json "$out/bench_level2.json" --out "$out/candidates" > "$out/bench.txt" 2>&1
echo "bench rc=$? ($(( $(date +%s) - start )) s)"
[ -f "$out/bench_level2.md" ] && tail -n 24 "$out/bench_level2.md"
