#!/usr/bin/env bash
# The delay backlog test (many timer messages due at once, sends measured
# beside them): MESSAGES timer messages (default
# 1,000,000 of 1 KiB) all due DELAY seconds (default 120) after the run
# starts, on a fresh three-node group, with pipelined sends measured before
# (baseline), while the backlog waits in the schedule, and while it drains.
# Prints the three send rates and the delay bench's result; writes
# delay-backlog.html. Run from the repository root.
#
#   ./scripts/delay-backlog.sh                                   # about 5 min
#   MESSAGES=2000 DELAY=8 BASELINE=1s SEND=1s ./scripts/delay-backlog.sh   # a quick look
#
# Settings (environment): MESSAGES, DELAY (seconds); BASELINE (default
# 10s) and SEND (default 20s), the length of the baseline send run and of
# the runs while the backlog waits and drains; BASE_PORT, the group's
# first client port (default 10911; raft +10, HTTP +20).
set -euo pipefail
MESSAGES=${MESSAGES:-1000000}
DELAY=${DELAY:-120}
BASELINE=${BASELINE:-10s}
SEND=${SEND:-20s}
BASE_PORT=${BASE_PORT:-10911}
addrs="127.0.0.1:$BASE_PORT,127.0.0.1:$((BASE_PORT + 1)),127.0.0.1:$((BASE_PORT + 2))"
go build -o ./raftmq ./cmd/raftmq
data=$(mktemp -d)
./raftmq cluster --demo 0 --data "$data" --base-port "$BASE_PORT" >"$data/cluster.log" 2>&1 &
group=$!
trap 'kill $group 2>/dev/null; wait $group 2>/dev/null; rm -rf "$data"' EXIT
for _ in $(seq 1 120); do
  grep -aq 'watching' "$data/cluster.log" && break
  kill -0 $group 2>/dev/null || { cat "$data/cluster.log"; exit 1; }
  sleep 0.25
done
grep -aq 'watching' "$data/cluster.log" || { cat "$data/cluster.log"; exit 1; }
send() { ./raftmq bench produce --addr "$addrs" --duration "$1" --window 1000 --auto-batch --topic base 2>/dev/null | tail -1; }
echo "baseline:    $(send "$BASELINE")"
start=$(date +%s)
./raftmq bench delay --addr "$addrs" --messages "$MESSAGES" --delay "${DELAY}s" --same-due --html delay-backlog.html >"$data/delay.out" 2>"$data/delay.err" &
bench=$!
sleep $((DELAY * 5 / 8))
echo "waiting:     $(send "$SEND")"
wait_s=$((start + DELAY + 4 - $(date +%s)))
if [ "$wait_s" -gt 0 ]; then sleep "$wait_s"; fi
echo "draining:    $(send "$SEND")"
status=0
wait $bench || status=$?
cat "$data/delay.out"
if [ "$status" -ne 0 ]; then
  echo "delay-backlog.sh: bench delay failed (exit $status):" >&2
  cat "$data/delay.err" >&2
  exit "$status"
fi
