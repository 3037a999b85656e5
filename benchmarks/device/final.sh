#!/usr/bin/env bash
# seconds: 480
# The closing GPU round: every GPU test of the suite, then `stitch-lsp bench` on level 2 problems
# not benched through the full Verifier before (torch.compile included), in the time left.
set -u
out="${AREA_OUT:?}"
start=$(date +%s)
kb="${STITCH_SHARED_DIR:-shared}/kernelbench-dev"
export TORCH_EXTENSIONS_DIR=/tmp/torch-ext
timeout 270 python3 -m pytest -m gpu tests -p no:cacheprovider -q -rA > "$out/pytest_gpu.txt" 2>&1
echo "pytest rc=$? ($(( $(date +%s) - start )) s)"
grep -E "^(PASSED|FAILED|ERROR)|passed|failed" "$out/pytest_gpu.txt" | tail -n 80
left=$(( 470 - ($(date +%s) - start) ))
if [ "$left" -gt 40 ] && [ -d "$kb" ]; then
  timeout "$left" python3 -m stitch_lsp bench "$kb" --level 2 \
    --only "${FINAL_BENCH:-14,52,67,2,1,24,41,30,4,22,12,76}" \
    --json "$out/bench_level2.json" > "$out/bench.txt" 2>&1
  echo "bench rc=$? ($(( $(date +%s) - start )) s)"
  [ -f "$out/bench_level2.md" ] && cat "$out/bench_level2.md"
fi
