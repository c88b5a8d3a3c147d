#!/usr/bin/env bash
# limits.sh: this machine's limits and raftmq's send figures as fractions
# of them, measured side by side in each round: the "limit" of the
# README's benchmark table and docs/benchmarks.md.
#
#   ./scripts/limits.sh                          # 2 rounds: 3 s probes, 10 s runs (~2 min)
#   ROUNDS=1 PROBE=1s DURATION=3s ./scripts/limits.sh   # a quick look
#
# Per round: `raftmq bench limits` on the group's file system (fdatasync
# p50/p99 of 4 KiB appends, bandwidth of 1 MiB appends each fdatasynced,
# loopback TCP round trip p50/p99), then a fresh three-node group and one
# send at a time (window 1) and pipelined auto-batched sends (window
# 1000), each stated against its limit: one at a time against fdatasync +
# 2 round trips, pipelined against the bandwidth / 3 replicas. Prints the
# limits, each run and each fraction; results in $data/round-N.*.
# The group's data is in TMPDIR (default /tmp): measure the disk it is on.
# Uses ports 15911-15933 (BASE_PORT moves them: clients +0..2, raft
# +10..12, HTTP +20..22); stops what it started. Measurements hold LOCK
# (default /tmp/raftmq-bench.lock; empty: none), so that two scripts never
# measure at once. KEEP=1 keeps the results' directory.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$HOME/go/bin:$PATH"
ROUNDS=${ROUNDS:-2}
PROBE=${PROBE:-3s}
DURATION=${DURATION:-10s}
BASE_PORT=${BASE_PORT:-15911}
LOCK=${LOCK-/tmp/raftmq-bench.lock}
data=$(mktemp -d "${TMPDIR:-/tmp}/raftmq-limits.XXXXXX")
. scripts/group.sh
trap 'stop_group; rm -rf "$data/group"; [ "${KEEP:-0}" = 1 ] || rm -rf "$data"' EXIT

echo "== build"
go build -o raftmq ./cmd/raftmq

bench() {
  ./raftmq bench produce --addr "127.0.0.1:$BASE_PORT,127.0.0.1:$((BASE_PORT + 1)),127.0.0.1:$((BASE_PORT + 2))" --duration "$DURATION" --json "$@" 2>/dev/null | tail -1
}

hold_lock
for r in $(seq 1 "$ROUNDS"); do
  echo "== round $r: limits ($(cut -d' ' -f1-3 /proc/loadavg) load)"
  ./raftmq bench limits --dir "$data" --duration "$PROBE" --json >"$data/round-$r.limits"
  echo "== round $r: raftmq"
  fresh_group --base-port "$BASE_PORT"
  bench --window 1 | tee "$data/round-$r.runs"
  bench --window 1000 --auto-batch | tee -a "$data/round-$r.runs"
  stop_group
  echo "== round $r: the limits and each run as a fraction of its limit"
  ./raftmq bench limits --limits "$data/round-$r.limits" --against "$data/round-$r.runs"
done
