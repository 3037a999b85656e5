#!/usr/bin/env bash
# seconds: 570
# Session 10's first call: session 9's two unrun rounds in one command. First session9d (the
# attention choice and the copy-free q/k/v split: attention and family GPU tests, bf16 timing of
# ViT-B/16, ViT-S, BERT and GPT-2), then session9b (the bf16 four-baseline table) on what is left.
set -u
out="${AREA_OUT:-/tmp/session10a-out}"
here="$(dirname "$0")"
begin=$(date +%s)
AREA_OUT="$out/9d" CAP=150 timeout -k 5 160 bash "$here/session9d.sh"
echo "9d done ($(( $(date +%s) - begin )) s)"
left=$(( 560 - ($(date +%s) - begin) ))
AREA_OUT="$out/9b" BUDGET=$left WARM=$(( left / 2 )) timeout -k 5 "$left" bash "$here/session9b.sh"
echo "9b done ($(( $(date +%s) - begin )) s)"
