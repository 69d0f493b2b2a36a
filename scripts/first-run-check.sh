#!/usr/bin/env bash
# first-run-check.sh [RUNS] measures the first hour as a newcomer meets it. Each run takes a fresh clone of this
# repository's HEAD (outside it, with no ../shared beside it) and a fresh HOME (empty Go caches, no engine, no npm
# cache; the system's certificates and proxies kept), and runs `make demo` and then `make test` there while another
# cold build of the same tree runs beside them. It prints each command's exit status, time and longest silence (the
# longest stretch without a line of output, the start and the end included), and exits 1 when a command fails or
# is silent longer than SILENCE_LIMIT seconds (default 30). The logs, each line stamped with its second, stay in
# the folder it names.
set -uo pipefail
runs=${1:-1}
limit=${SILENCE_LIMIT:-30}
repo=$(cd "$(dirname "$0")/.." && pwd)
top=$(mktemp -d /tmp/visor-first-run.XXXXXX)
fail=0

# stamped LOG CMD... runs CMD with stdout and stderr as one stream into LOG, each line behind its time since the
# start, and writes the longest silence to LOG.gap. Its status is CMD's.
stamped() {
  local log=$1
  shift
  "$@" 2>&1 | {
    local start=${EPOCHREALTIME/[.,]/} last max=0 t line
    last=$start
    while IFS= read -r line; do
      t=${EPOCHREALTIME/[.,]/}
      (( t - last > max )) && max=$((t - last))
      last=$t
      printf '%7d %s\n' $(((t - start) / 1000000)) "$line"
    done
    t=${EPOCHREALTIME/[.,]/}
    (( t - last > max )) && max=$((t - last))
    printf '%d.%d\n' $((max / 1000000)) $((max % 1000000 / 100000)) >"$log.gap"
  } >"$log"
  return "${PIPESTATUS[0]}"
}

echo "first-run-check: $runs run(s) of make demo + make test on fresh clones of $(git -C "$repo" rev-parse --short HEAD); logs in $top"
for i in $(seq 1 "$runs"); do
  dir=$top/run$i
  mkdir -p "$dir/home" "$dir/other"
  git clone -q "$repo" "$dir/visor"
  # The clone is taken when its run starts, so a long check names the commit each run tried.
  echo "run $i on $(git -C "$dir/visor" rev-parse --short HEAD)"
  # Another build beside the run: a cold build of the same tree with its own caches, again and again.
  setsid bash -c 'export HOME=$1 GOCACHE=$1/cache GOPATH=$1/go GOTOOLCHAIN=local; cd "$2" || exit
    while :; do go build -o /dev/null ./... >/dev/null 2>&1; rm -rf "$GOCACHE"; done' _ "$dir/other" "$dir/visor" &
  other=$!
  for target in demo test; do
    start=$SECONDS
    # The system's settings stay (certificates, proxies, npm's global config); what a user's HOME or shell would
    # have set for Go, the XDG folders and visor goes.
    unset_user=()
    for v in $(compgen -e | grep -E '^(GO|XDG_|VISOR_|npm_config_)'); do unset_user+=(-u "$v"); done
    stamped "$dir/$target.log" env "${unset_user[@]}" HOME="$dir/home" GOTOOLCHAIN=local \
      bash -c 'cd "$1" && make "$2"' _ "$dir/visor" "$target" </dev/null
    rc=$?
    gap=$(cat "$dir/$target.log.gap")
    verdict=ok
    if [ "$rc" != 0 ]; then verdict="FAILED (exit $rc)"; fail=1; fi
    if (( ${gap/./} > limit * 10 )); then verdict="$verdict, SILENT over ${limit} s"; fail=1; fi
    printf 'run %d  make %-4s  %4d s  longest silence %5.1f s  load %s  %s\n' "$i" "$target" $((SECONDS - start)) \
      "$gap" "$(cut -d' ' -f1-3 /proc/loadavg)" "$verdict"
    tail -n 1 "$dir/$target.log" | sed 's/^/    last line: /'
  done
  kill -- -"$other" 2>/dev/null
  wait "$other" 2>/dev/null
  # The caches are large (Go's build cache, the engine, npm): keep the logs only.
  chmod -R u+w "$dir/home" "$dir/other" 2>/dev/null
  rm -rf "$dir/home" "$dir/other" "$dir/visor"
done
exit $fail
