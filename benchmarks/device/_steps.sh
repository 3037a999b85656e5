# Sourced by the session rounds: time since $start, and a step's time limit within ${CAP:-530}.
since() { echo "$(( $(date +%s) - start )) s"; }
# step LIMIT: LIMIT seconds, or what is left of ${CAP:-530} when less
step() {
  local left=$(( ${CAP:-530} - ($(date +%s) - start) ))
  left=$(( left > 1 ? left : 1 ))  # timeout 0 would mean no limit
  echo $(( $1 < left ? $1 : left ))
}
