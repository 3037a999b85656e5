#!/usr/bin/env bash
# Runs one round of GPU work on a CUDA machine whose python3 has torch but not our pure-Python deps.
# Usage: bash benchmarks/device/round.sh AREA [AREA...]
#   Each AREA has a script benchmarks/device/AREA.sh. It runs with:
#     AREA_OUT  a folder for its results (tarred into $OUT/AREA.tgz afterwards)
#     PYTHONPATH  the repo root plus wheels from .whl/ (when present) installed into /tmp/site
#   and a time cap of AREA_SECONDS (default 120).
set -u
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
OUT="${OUT:-$root/out}"
mkdir -p "$OUT"
if [ -d .whl ] && [ ! -d /tmp/site ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "wheel install failed"; exit 1; }
fi
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}:/tmp/site"
export PYTHONUNBUFFERED=1
export STITCH_CACHE_DIR="${STITCH_CACHE_DIR:-/tmp/stitch-cache}"
[ -d "$root/shared" ] && export STITCH_SHARED_DIR="${STITCH_SHARED_DIR:-$root/shared}"
nvidia-smi --query-gpu=name,compute_cap,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/machine.txt"
for area in "$@"; do
  script="benchmarks/device/$area.sh"
  [ -f "$script" ] || { echo "== $area: no $script"; continue; }
  export AREA_OUT="/tmp/results/$area"
  rm -rf "$AREA_OUT"; mkdir -p "$AREA_OUT"
  cap="$(grep -oP '^# seconds: \K[0-9]+' "$script" || echo 120)"
  cap="${ROUND_CAP:-$cap}"  # a shorter cap where GPU time is short
  echo "== $area (cap ${cap}s) $(date +%T)"
  start=$(date +%s)
  timeout -k 10 "$cap" bash "$script" > "$AREA_OUT/log.txt" 2>&1
  rc=$?
  echo "rc=$rc seconds=$(( $(date +%s) - start ))" >> "$AREA_OUT/log.txt"
  tail -n 25 "$AREA_OUT/log.txt"
  tar -czf "$OUT/$area.tgz" -C /tmp/results "$area"
done
echo "== round done $(date +%T)"
