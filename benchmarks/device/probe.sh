#!/usr/bin/env bash
# seconds: 400
# Diagnosis before a change: where GPU time goes (benchmarks/kernel_profile.py, PROFILE_ONLY in
# HELDOUT_DIR), how far the fp32 reference and the candidate are from float64
# (benchmarks/tolerance_probe.py, TOLERANCE_FILES), then the held-out problems not yet timed
# (PROBE_ONLY) through benchmarks/l3program_speed.py.
set -u
out="${AREA_OUT:-/tmp/probe-out}"
mkdir -p "$out"
start=$(date +%s)
folder="${HELDOUT_DIR:-.heldout/level3}"
timeout 120 python3 benchmarks/kernel_profile.py "$folder" --only "${PROFILE_ONLY:-34,38}" \
  > "$out/profile.txt" 2>&1
echo "profile rc=$? ($(( $(date +%s) - start )) s)"; grep -v -i warn "$out/profile.txt" | tail -n 40
timeout 90 python3 benchmarks/tolerance_probe.py ${TOLERANCE_FILES:-$folder/10_ResNet101.py} \
  --trials 2 --no-compile --json "$out/tolerance.json" > "$out/tolerance.txt" 2>&1
echo "tolerance rc=$? ($(( $(date +%s) - start )) s)"; grep -v -i warn "$out/tolerance.txt" | tail -n 8
left=$(( 390 - ($(date +%s) - start) ))
timeout "$left" python3 benchmarks/l3program_speed.py "$folder" --only "${PROBE_ONLY:-30,40,41,42,45,46,47,48}" \
  --runs 10 --json "$out/speed.json" > "$out/speed.txt" 2>&1
echo "speed rc=$? ($(( $(date +%s) - start )) s)"
grep -E "correct=|FAILED|not handled|geomean|rule chose" "$out/speed.txt"
