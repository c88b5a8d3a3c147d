#!/usr/bin/env bash
# The delay backlog test (many timer messages due at once, sends measured
# beside them): MESSAGES timer messages (default
# 1,000,000 of 1 KiB) all due DELAY seconds (default 120) after the run
# starts, on a fresh three-node group, with pipelined sends measured before
# (baseline), while the backlog waits in the schedule, and while it drains.
# Prints the three send rates and the delay bench's result; writes
# delay-backlog.html. Run from the repository root.
set -euo pipefail
MESSAGES=${MESSAGES:-1000000}
DELAY=${DELAY:-120}
go build -o ./raftmq ./cmd/raftmq
data=$(mktemp -d)
./raftmq cluster --demo 0 --data "$data" >"$data/cluster.log" 2>&1 &
group=$!
trap 'kill $group 2>/dev/null; wait $group 2>/dev/null; rm -rf "$data"' EXIT
sleep 5
send() { ./raftmq bench produce --duration "$1" --window 1000 --auto-batch --topic base 2>/dev/null | tail -1; }
echo "baseline:    $(send 10s)"
start=$(date +%s)
./raftmq bench delay --messages "$MESSAGES" --delay "${DELAY}s" --same-due --html delay-backlog.html >"$data/delay.out" 2>"$data/delay.err" &
bench=$!
sleep $((DELAY * 5 / 8))
echo "waiting:     $(send 20s)"
sleep $((start + DELAY + 4 - $(date +%s)))
echo "draining:    $(send 20s)"
wait $bench || true
cat "$data/delay.out"
