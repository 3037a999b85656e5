#!/usr/bin/env bash
# seconds: 560
# Replay only where it pays: every level-3 dev problem (or $REPLAY_ONLY) timed as generated,
# with replay forced (STITCH_CUDA_GRAPH=force) and with plain launches (STITCH_CUDA_GRAPH=0),
# beside eager and eager under a CUDA graph; says for how many the runner's rule chose the
# faster way. Then level 2 through bench ($REPLAY_L2, default: the five where the rule keeps
# replay and five where it does not) to compare with the round-4 figures in BENCHMARKS.md.
set -u
out="${AREA_OUT:-/tmp/replay-out}"
mkdir -p "$out"
start=$(date +%s)
export TORCH_EXTENSIONS_DIR="${TORCH_EXTENSIONS_DIR:-/tmp/torch-ext}"
only="${REPLAY_ONLY:-1,2,3,4,5,6,8,9,13,19,20,21,25,28,31,33,35,39,43,44,49,50}"
timeout 380 python3 benchmarks/l3program_speed.py tests/data/kernelbench/level3 --only "$only" \
  --runs 10 --json "$out/l3_replay.json" > "$out/l3_replay.txt" 2>&1
echo "level 3 rc=$? ($(( $(date +%s) - start )) s)"
tail -n 30 "$out/l3_replay.txt"
left=$(( 540 - ($(date +%s) - start) ))
if [ "$left" -gt 60 ]; then
  timeout "$left" python3 -m stitch_lsp bench tests/data/kernelbench --level 2 \
    --only "${REPLAY_L2:-22,24,56,59,52,76,12,17,40,1}" --no-extra-baselines \
    --json "$out/l2_bench.json" --out /tmp/replay-l2 > "$out/l2_bench.txt" 2>&1
  echo "level 2 rc=$? ($(( $(date +%s) - start )) s)"
  tail -n 8 "$out/l2_bench.txt"
fi
