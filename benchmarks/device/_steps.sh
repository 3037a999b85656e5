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
