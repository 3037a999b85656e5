#!/usr/bin/env bash
# seconds: 300
# Branch-free argmax/argmin state update: the builtin GPU tests, then eager and byte-floor
# timings and the Verifier's protocol on the level 1 middle-dim reductions.
set -u
out="${AREA_OUT:-/tmp/argmax-out}"
mkdir -p "$out"
start=$(date +%s)
kb="${STITCH_SHARED_DIR:-shared}/kernelbench-dev"
python3 -m pytest -m gpu tests/builtin -p no:cacheprovider -q -rs > "$out/pytest.txt" 2>&1
echo "pytest rc=$? ($(( $(date +%s) - start )) s)"
tail -n 3 "$out/pytest.txt"
timeout 100 python3 benchmarks/builtin_speed.py "$kb"/level1/51_*.py "$kb"/level1/47_*.py \
  --json "$out/speed.json" > "$out/speed.txt" 2>&1
echo "speed rc=$? ($(( $(date +%s) - start )) s)"
grep -v -i warn "$out/speed.txt" | tail -n 5
timeout 120 python3 -m stitch_lsp bench "$kb" --level 1 --only 51 \
  --json "$out/bench_level1.json" > "$out/bench.txt" 2>&1
echo "bench rc=$? ($(( $(date +%s) - start )) s)"
[ -f "$out/bench_level1.md" ] && tail -n 10 "$out/bench_level1.md"
