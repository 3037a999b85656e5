# Sourced by real_smoke.sh and zoo.sh: l3program_speed.py over FILES for each dtype in $DTYPES
# (default fp32 then bf16), within $BUDGET seconds (default 540) counted from $start. A run that
# ends with rc 3 (a CUDA fault lost the context) goes on in a new process with --resume.
# Usage: dtype_sweep NAME DEFAULT_RUNS FILE...   (results: $out/NAME-<dtype>.json and .txt)
dtype_sweep() {
  local name=$1 runs=$2 dtype left rc attempt
  shift 2
  for dtype in ${DTYPES:-float32 bfloat16}; do
    left=$(( ${BUDGET:-540} - ($(date +%s) - start) ))
    [ "$left" -gt 30 ] || { echo "$dtype skipped"; continue; }
    [ -n "${KEEP_ROWS:-}" ] || rm -f "$out/$name-$dtype.json"  # KEEP_ROWS: go on from rows kept
    for attempt in 1 2 3 4 5 6; do
      left=$(( ${BUDGET:-540} - ($(date +%s) - start) ))
      [ "$left" -gt 20 ] || break
      STITCH_MODEL_DTYPE=$dtype timeout "$left" python3 benchmarks/l3program_speed.py "$@" \
        --jobs 12 --runs "${RUNS:-$runs}" --resume --json "$out/$name-$dtype.json" \
        >> "$out/$name-$dtype.txt" 2>&1
      rc=$?
      [ "$rc" = 3 ] || break
    done
    echo "$dtype rc=$rc ($(( $(date +%s) - start )) s)"
    grep -E "correct=|FAILED|not handled|geomean|Error|from float64" "$out/$name-$dtype.txt" \
      | cut -c1-230 | tail -n 40
  done
}
