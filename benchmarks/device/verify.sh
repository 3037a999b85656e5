#!/usr/bin/env bash
# seconds: 360
# GPU round for the Verifier: its GPU tests (the float64 oracle, the extra baseline columns, the
# timeline, a GPU shared with a busy process), and a small `stitch-lsp bench` (3 level-2 and 3
# level-3 problems from tests/data/kernelbench, builtin coder, all four baselines).
# With two or more GPUs the bench runs on the others while the tests use cuda:0; with one GPU
# it runs after them in the time left, and writes what it finished.
set -u
out="${AREA_OUT:?}"
start=$(date +%s)
kb=tests/data/kernelbench
ngpu=$(nvidia-smi -L | grep -c "^GPU")
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv > "$out/gpu.txt" 2>&1

bench() {  # LEVEL ONLY DEVICES SECONDS
  timeout "$4" python3 -m stitch_lsp bench "$kb" --level "$1" --only "$2" --devices "$3" \
    --out "/tmp/stitch-bench-l$1" --json "$out/bench_level$1.json" > "$out/bench_level$1.txt" 2>&1
  echo "bench level $1 rc=$? ($(( $(date +%s) - start )) s)" >> "$out/bench_rc.txt"
}

L2="${VERIFY_BENCH_L2:-76,12,67}"
L3="${VERIFY_BENCH_L3:-1,4,8}"
if [ "$ngpu" -ge 2 ]; then
  others=$(seq -s, -f "cuda:%g" 1 $(( ngpu - 1 )))
  ( bench 2 "$L2" "$others" 200; bench 3 "$L3" "$others" $(( 340 - ($(date +%s) - start) )) ) &
  bench_pid=$!
fi

timeout 270 python3 -m pytest -m gpu tests/verify -p no:cacheprovider -q -rA \
  > "$out/pytest.log" 2>&1
echo "pytest rc=$? ($(( $(date +%s) - start )) s)"

if [ "$ngpu" -ge 2 ]; then
  wait "$bench_pid"
else
  left=$(( 340 - ($(date +%s) - start) ))
  [ "$left" -gt 60 ] && bench 2 "$L2" cuda:0 $(( left / 2 ))
  left=$(( 340 - ($(date +%s) - start) ))
  [ "$left" -gt 30 ] && bench 3 "$L3" cuda:0 "$left"
fi

echo "== pytest"; grep -E "^(PASSED|FAILED|ERROR|SKIPPED)|passed|failed" "$out/pytest.log" | tail -n 60
echo "== bench"; cat "$out/bench_rc.txt" 2>/dev/null
for lvl in 2 3; do [ -f "$out/bench_level$lvl.md" ] && cat "$out/bench_level$lvl.md"; done
echo "== done ($(( $(date +%s) - start )) s)"
