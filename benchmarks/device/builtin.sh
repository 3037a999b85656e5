#!/usr/bin/env bash
# seconds: 240
# Builtin coder on a GPU: correctness tests (odd sizes, every op family), then
# `stitch-lsp bench` (the Verifier's full protocol, torch.compile included) on the level 2
# problems not benched in earlier rounds. BUILTIN_SPEED=1 also runs benchmarks/builtin_speed.py
# (eager and byte-floor timings over all of level 2 and some of level 1, ~60 s).
set -u
out="${AREA_OUT:-/tmp/builtin-out}"
mkdir -p "$out"
start=$(date +%s)
shared="${STITCH_SHARED_DIR:-shared}"
kb="$shared/kernelbench-dev"
python3 -m pytest -m gpu tests/builtin -p no:cacheprovider -q -rs --junitxml="$out/junit.xml" \
  > "$out/pytest.txt" 2>&1
echo "pytest rc=$? ($(( $(date +%s) - start )) s)"
grep -E "passed|failed|Error|error:" "$out/pytest.txt" | tail -n 15
if [ "${BUILTIN_SPEED:-0}" = 1 ] && [ -d "$kb" ]; then
  l1=""
  for n in 19 47 51 94 23 40; do l1="$l1 $(ls "$kb"/level1/${n}_*.py)"; done
  # shellcheck disable=SC2086
  timeout 100 python3 benchmarks/builtin_speed.py "$kb/level2" $l1 --threads 14 \
    --json "$out/speed.json" > "$out/speed.txt" 2>&1
  echo "speed rc=$? ($(( $(date +%s) - start )) s)"
  grep -v -i warn "$out/speed.txt" | tail -n 40
fi
left=$(( 232 - ($(date +%s) - start) ))
if [ "$left" -gt 35 ] && [ -d "$kb" ]; then
  timeout "$left" python3 -m stitch_lsp bench "$kb" --level 2 \
    --only "${BUILTIN_BENCH:-14,52,67,2,1,24,41,30,4,22,12,76}" \
    --json "$out/bench_level2.json" --out "$out/candidates" > "$out/bench.txt" 2>&1
  echo "bench rc=$? ($(( $(date +%s) - start )) s)"
  [ -f "$out/bench_level2.md" ] && tail -n 20 "$out/bench_level2.md"
else
  echo "bench skipped (${left}s left)"
fi
