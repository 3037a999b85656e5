#!/usr/bin/env bash
# seconds: 560
# Reduction loops unrolled by hand (several loads in flight per thread): the builtin GPU tests,
# eager and byte-floor timings over level 2 and the level 1 reductions, then the Verifier's
# protocol with torch.compile on the level 1 reductions.
set -u
out="${AREA_OUT:-/tmp/reductions-out}"
mkdir -p "$out"
start=$(date +%s)
kb="${STITCH_SHARED_DIR:-shared}/kernelbench-dev"
python3 -m pytest -m gpu tests/builtin -p no:cacheprovider -q -rs > "$out/pytest.txt" 2>&1
echo "pytest rc=$? ($(( $(date +%s) - start )) s)"
tail -n 3 "$out/pytest.txt"
l1=""
for n in 19 23 24 33 36 40 42 47 51 88 94; do l1="$l1 $(ls "$kb"/level1/${n}_*.py)"; done
# shellcheck disable=SC2086
timeout 200 python3 benchmarks/builtin_speed.py "$kb/level2" $l1 --threads 14 \
  --json "$out/speed.json" > "$out/speed.txt" 2>&1
echo "speed rc=$? ($(( $(date +%s) - start )) s)"
grep -v -i warn "$out/speed.txt" | tail -n 45
left=$(( 550 - ($(date +%s) - start) ))
timeout "$left" python3 -m stitch_lsp bench "$kb" --level 1 --only 47,51,23,24,40,36 \
  --json "$out/bench_level1.json" --out "$out/candidates" > "$out/bench.txt" 2>&1
echo "bench rc=$? ($(( $(date +%s) - start )) s)"
[ -f "$out/bench_level1.md" ] && tail -n 16 "$out/bench_level1.md"
