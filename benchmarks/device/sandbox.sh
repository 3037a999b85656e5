#!/usr/bin/env bash
# seconds: 540
# The Verifier in bubblewrap and unconfined (benchmarks/sandbox_verdicts.py) on the dev problems
# of level 1 and level 2 (tests/data/kernelbench holds copies), one level per GPU when there are
# two. The bwrap binary comes from $STITCH_BWRAP (carried in .bwrap/ when the machine has none).
set -u
out="${AREA_OUT:?}"
kb=tests/data/kernelbench
if [ -z "${STITCH_BWRAP:-}" ] && ! command -v bwrap >/dev/null 2>&1 && [ -x .bwrap/bwrap ]; then
  export STITCH_BWRAP="$PWD/.bwrap/bwrap"
fi
echo "bwrap: ${STITCH_BWRAP:-$(command -v bwrap)}"; "${STITCH_BWRAP:-bwrap}" --version
python3 -c "from stitch_lsp.workers.sandbox import sandbox_problem as p; print('sandbox problem:', p())"
ngpu=$(nvidia-smi -L | grep -c "^GPU")
d2=cuda:0; [ "$ngpu" -ge 2 ] && d2=cuda:1
python3 benchmarks/sandbox_verdicts.py $kb/level1 --device cuda:0 --jsonl "$out/level1.jsonl" \
  > "$out/level1.txt" 2>&1 &
p1=$!
if [ "$ngpu" -lt 2 ]; then wait $p1; fi
python3 benchmarks/sandbox_verdicts.py $kb/level2 --device $d2 --jsonl "$out/level2.jsonl" \
  > "$out/level2.txt" 2>&1
wait
tail -n 4 "$out/level1.txt" "$out/level2.txt"
