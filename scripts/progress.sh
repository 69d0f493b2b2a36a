# Sourced by the scripts. progress MSG CMD... runs CMD after saying MSG, and every 15 s while it runs says how long
# it has been, so a first run (a cold Go build is minutes on two cores) is never a silent wait.
progress() {
  local msg=$1 start=$SECONDS next=15 pid
  shift
  echo "$msg" >&2
  "$@" &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if (( SECONDS - start >= next )); then
      echo "  … still at it ($(( SECONDS - start )) s)" >&2
      next=$(( next + 15 ))
    fi
  done
  wait "$pid"
}
