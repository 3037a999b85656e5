#!/usr/bin/env bash
# seconds: 180
# Builtin coder on a GPU: correctness tests (odd sizes, every op family); speed against eager
# (and the byte floor) over KernelBench level 2 plus some level 1 problems with
# benchmarks/builtin_speed.py; then, with the time left, `stitch-lsp bench` (the Verifier's full
# protocol, torch.compile included) on a sample. BUILTIN_BENCH picks that sample.
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
if [ -d "$kb" ]; then
  l1=""
  for n in 19 47 51 94 23 40; do l1="$l1 $(ls "$kb"/level1/${n}_*.py)"; done
  # shellcheck disable=SC2086
  timeout 100 python3 benchmarks/builtin_speed.py "$kb/level2" $l1 --threads 14 \
    --json "$out/speed.json" > "$out/speed.txt" 2>&1
  echo "speed rc=$? ($(( $(date +%s) - start )) s)"
  grep -v -i warn "$out/speed.txt" | tail -n 40
fi
left=$(( 172 - ($(date +%s) - start) ))
if [ "$left" -gt 35 ] && [ -d "$kb" ]; then
  timeout "$left" python3 -m stitch_lsp bench "$kb" --level 2 --only "${BUILTIN_BENCH:-99,17,21}" \
    --json "$out/bench_level2.json" --out "$out/candidates" > "$out/bench.txt" 2>&1
  echo "bench rc=$? ($(( $(date +%s) - start )) s)"
  [ -f "$out/bench_level2.md" ] && tail -n 12 "$out/bench_level2.md"
else
  echo "bench skipped (${left}s left)"
fi
