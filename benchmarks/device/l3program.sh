#!/usr/bin/env bash
# seconds: 360
# Whole-forward programs on a GPU: the recurrent / graph-replay / level-3 GPU tests, then timings
# of level-3 candidates with and without CUDA graph replay (STITCH_CUDA_GRAPH=0) against eager and
# eager-in-a-graph, then `stitch-lsp bench` (the full Verifier, torch.compile included) on them.
# L3_ONLY picks the problems (default 35,39,33,8,9,19; unhandled ones are listed with the reason).
set -u
out="${AREA_OUT:-/tmp/l3program-out}"
mkdir -p "$out"
start=$(date +%s)
only="${L3_ONLY:-35,39,33,8,9,19}"
kb=tests/data/kernelbench
timeout 150 python3 -m pytest -m gpu tests/builtin/test_gpu_program.py -p no:cacheprovider -q -rA \
  > "$out/pytest.txt" 2>&1
echo "pytest rc=$? ($(( $(date +%s) - start )) s)"
grep -E "^(PASSED|FAILED|ERROR)|passed|failed" "$out/pytest.txt" | tail -n 40
timeout 100 python3 benchmarks/l3program_speed.py "$kb/level3" --only "$only" --runs 10 \
  --json "$out/speed.json" > "$out/speed.txt" 2>&1
echo "speed rc=$? ($(( $(date +%s) - start )) s)"
grep -v -i warn "$out/speed.txt" | tail -n 20
left=$(( 350 - ($(date +%s) - start) ))
if [ "$left" -gt 40 ]; then
  timeout "$left" python3 -m stitch_lsp bench "$kb" --level 3 --only "$only" \
    --json "$out/bench_level3.json" --out "$out/candidates" > "$out/bench.txt" 2>&1
  echo "bench rc=$? ($(( $(date +%s) - start )) s)"
  [ -f "$out/bench_level3.md" ] && tail -n 20 "$out/bench_level3.md"
else
  echo "bench skipped (${left}s left)"
fi
