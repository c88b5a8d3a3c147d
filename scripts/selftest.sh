#!/usr/bin/env bash
# The long chaos self-test (raftmq jepsen selftest), in the background:
# every mutant's campaign against the mutant and the correct build, 10
# seeds each by default (about an hour on 2 cores). Extra arguments go to
# the self-test:
#   ./scripts/selftest.sh start [args]  # build, start in the background, print where it writes
#   ./scripts/selftest.sh status [DIR]  # progress: runs done, flagged so far, the run under way
#   ./scripts/selftest.sh wait [DIR]    # wait for it, print the table; exit status of the self-test
#   ./scripts/selftest.sh start --mutant vote-not-fsynced --seed 101   # one mutant's row pair
# DIR defaults to the last one started (jepsen-runs/selftest-latest).
# The table (Markdown) is in DIR/table.md once done, the full output in
# DIR/selftest.log, each run's directory (report.html) under DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$HOME/go/bin:$PATH"
latest=jepsen-runs/selftest-latest

cmd=${1:-}
shift || true
case "$cmd" in
start)
  dir=jepsen-runs/selftest-$(date -u +%Y%m%d-%H%M%S)
  mkdir -p "$dir"
  go build -tags mutant -o "$dir/raftmq-mutant" ./cmd/raftmq
  go build -o "$dir/raftmq" ./cmd/raftmq
  echo "$@" >"$dir/args"
  nohup "$dir/raftmq-mutant" jepsen selftest --seeds 10 --time-limit 12s \
    --binary "$dir/raftmq" --mutant-binary "$dir/raftmq-mutant" --out "$dir/runs" "$@" \
    >"$dir/selftest.log" 2>&1 &
  echo $! >"$dir/pid"
  ln -sfn "$(basename "$dir")" "$latest"
  echo "selftest: started (pid $(cat "$dir/pid")), output in $dir/selftest.log"
  echo "selftest: progress: ./scripts/selftest.sh status; result: ./scripts/selftest.sh wait"
  ;;
status | wait)
  dir=${1:-$latest}
  [ -f "$dir/pid" ] || { echo "selftest: no self-test in $dir" >&2; exit 2; }
  pid=$(cat "$dir/pid")
  while :; do
    done_runs=$(grep -cE '^selftest:   (valid|flagged|harness failure)' "$dir/selftest.log" || true)
    flagged=$(grep -c '^selftest:   flagged' "$dir/selftest.log" || true)
    current=$(grep -E '^selftest: .* seed ' "$dir/selftest.log" | tail -1 || true)
    running=no
    if kill -0 "$pid" 2>/dev/null; then running=yes; fi
    elapsed=$(( $(date +%s) - $(stat -c %Y "$dir/pid") ))
    echo "selftest: $done_runs runs done ($flagged flagged) in ${elapsed}s; running: $running; now: ${current#selftest: }"
    if [ "$cmd" = status ] || [ $running = no ]; then break; fi
    sleep 30
  done
  if [ $running = no ]; then
    sed -n '/^| build/,$p' "$dir/selftest.log" | tee "$dir/table.md"
    grep -q 'PASSED$' "$dir/table.md"
  fi
  ;;
*)
  sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
  ;;
esac
