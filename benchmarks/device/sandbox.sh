#!/usr/bin/env bash
# seconds: 560
# The Verifier in bubblewrap and unconfined (benchmarks/sandbox_verdicts.py) on the dev problems
# of SANDBOX_LEVELS (default "1 2"; tests/data/kernelbench holds copies), one level after the
# other on cuda:0; SANDBOX_ONLY_<N> picks problems by number. Rows are written as they finish.
# The bwrap binary comes from $STITCH_BWRAP (carried in .bwrap/ when the machine has none).
set -u
out="${AREA_OUT:?}"
kb=tests/data/kernelbench
if [ -z "${STITCH_BWRAP:-}" ] && ! command -v bwrap >/dev/null 2>&1 && [ -x .bwrap/bwrap ]; then
  export STITCH_BWRAP="$PWD/.bwrap/bwrap"
fi
echo "bwrap: ${STITCH_BWRAP:-$(command -v bwrap)}"; "${STITCH_BWRAP:-bwrap}" --version
python3 -c "from stitch_lsp.workers.sandbox import sandbox_problem as p; print('sandbox problem:', p())"
for level in ${SANDBOX_LEVELS:-1 2}; do
  only_var="SANDBOX_ONLY_$level"; only="${!only_var:-}"
  files=$kb/level$level
  if [ -n "$only" ]; then
    files=$(for n in ${only//,/ }; do ls $kb/level$level/${n}_*.py; done)
  fi
  python3 benchmarks/sandbox_verdicts.py $files --device cuda:0 --trials 2 --timing-trials 10 \
    --jsonl "$out/level$level.jsonl" > "$out/level$level.txt" 2>&1
  echo "level $level rc=$?"; tail -n 4 "$out/level$level.txt"
done
