#!/usr/bin/env bash
# seconds: 360
# Whole-model capture on a GPU: the GPU tests of the new op families (cat along each dim, views
# and permutes, channel shuffle, size-1 reductions, values/indices, adaptive pools, embedding,
# attention, einsum, cumsum, segsum, padding, ViT patches) and of the level-3 dev problems
# shrunk to odd sizes; then `stitch-lsp bench --level 3` (the Verifier's protocol, eager and
# torch.compile timed) on the level-3 problems the builtin coder now handles, newly handled
# ones first. Needs einops in the GPU machine's Python (it is there).
# Run: bash benchmarks/device/round.sh l3capture
set -u
out="${AREA_OUT:-/tmp/l3capture-out}"
mkdir -p "$out"
start=$(date +%s)
kb="tests/data/kernelbench"
timeout 170 python3 -m pytest -m gpu tests/builtin/test_gpu_l3.py -p no:cacheprovider -q -rs \
  -W ignore --junitxml="$out/junit.xml" > "$out/pytest.txt" 2>&1
echo "pytest rc=$? ($(( $(date +%s) - start )) s)"
grep -E "passed|failed|Error|error:|^FAILED" "$out/pytest.txt" | tail -n 25
# Newly handled level-3 problems first, then the ones handled before this change.
for pass in "6,25,28,31,33,43,44,49,50" "1,2,3,4,5,8,9,13,19,20,21"; do
  left=$(( 350 - ($(date +%s) - start) ))
  if [ "$left" -lt 40 ]; then
    echo "bench ($pass) skipped: ${left}s left"
    continue
  fi
  tag="${pass%%,*}"
  timeout "$left" python3 -m stitch_lsp bench "$kb" --level 3 --only "$pass" \
    --json "$out/bench_level3_$tag.json" --out "$out/candidates" > "$out/bench_$tag.txt" 2>&1
  echo "bench ($pass) rc=$? ($(( $(date +%s) - start )) s)"
  [ -f "$out/bench_level3_$tag.md" ] && tail -n 14 "$out/bench_level3_$tag.md"
done
