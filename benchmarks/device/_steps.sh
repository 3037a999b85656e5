# Sourced by the session rounds: time since $start, and a step's time limit within ${CAP:-530}.
since() { echo "$(( $(date +%s) - start )) s"; }
# step LIMIT: LIMIT seconds, or what is left of ${CAP:-530} when less
step() {
  local left=$(( ${CAP:-530} - ($(date +%s) - start) ))
  left=$(( left > 1 ? left : 1 ))  # timeout 0 would mean no limit
  echo $(( $1 < left ? $1 : left ))
}
# gpu_tests LIMIT LOG PYTEST_ARGS...: the GPU tests named, in 8 workers, within step LIMIT, the
# whole output to LOG; its status is the caller's $?. `-o addopts` puts path imports in place
# of the repo's pytest options, as every round has run them.
gpu_tests() {
  local limit=$1 log=$2
  shift 2
  timeout "$(step "$limit")" python3 -m pytest -n 8 -m gpu "$@" -p no:cacheprovider -q -rA \
    -W ignore -o addopts="--import-mode=importlib" > "$log" 2>&1
}
# heldout_level2 LIMIT: the held-out level-2 problems the catalogue rewrites (HELDOUT2_DIR,
# default .heldout/level2, carried as an ignored folder: KernelBench's level 2 less the dev
# folder; HELDOUT2_ONLY picks them) against the four baselines, into $out/heldout2.{json,txt}.
heldout_level2() {
  local folder="${HELDOUT2_DIR:-.heldout/level2}"
  if [ ! -d "$folder" ]; then
    echo "no $folder: held-out level 2 skipped"
    return
  fi
  timeout "$(step "$1")" python3 benchmarks/l3program_speed.py "$folder" \
    --only "${HELDOUT2_ONLY:-13,18,42,44,50,51,72,98}" --jobs 8 --runs 10 --compile \
    --compile-jobs 8 --resume --json "$out/heldout2.json" > "$out/heldout2.txt" 2>&1
  echo "held-out level 2 rc=$? ($(since))"
  grep -E "correct=|Error|geomean" "$out/heldout2.txt" | cut -c1-300
}
