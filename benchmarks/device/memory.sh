#!/usr/bin/env bash
# seconds: 240
# The comparison without boolean-mask indexing: 36_RMSNorm_ (7 GiB input and output) through
# the Verifier's protocol, which ran out of memory before.
set -u
out="${AREA_OUT:-/tmp/memory-out}"
mkdir -p "$out"
start=$(date +%s)
kb="${STITCH_SHARED_DIR:-shared}/kernelbench-dev"
timeout 230 python3 -m stitch_lsp bench "$kb" --level 1 --only 36 \
  --json "$out/bench_level1.json" > "$out/bench.txt" 2>&1
echo "bench rc=$? ($(( $(date +%s) - start )) s)"
[ -f "$out/bench_level1.md" ] && tail -n 10 "$out/bench_level1.md"
