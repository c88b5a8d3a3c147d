#!/usr/bin/env bash
# compare.sh: the three-node benchmark table (docs/benchmarks.md) in one run, next to NATS
# JetStream measured on the same machine just before.
#
#   ./scripts/compare.sh            # NATS (both sync modes), etcd, then raftmq
#   NATS=0 ETCD=0 ./scripts/compare.sh   # raftmq only
#   QUEUES=0 ./scripts/compare.sh        # without the queue-count curve (scripts/queues-curve.sh)
#   SHORT=1 ./scripts/compare.sh         # every step once, 2 s runs, no quiet waits: does it all work?
#
# NATS and etcd run from scripts/peers (built through the Go module proxy
# at pinned versions, binaries in $PEERS_WORK/bin, /tmp/peers-work).
#
# Every raftmq scenario prints its result line and the CPU each process
# spent per message (from /proc/PID/stat for the brokers, /usr/bin/time for
# the client), and writes its HTML report (throughput and latency over
# time) to bench-results/compare-<time>/. Takes ~20 minutes. Uses ports BASE_PORT (10911) to
# BASE_PORT+22 (the group), BASE_PORT+1000.. (the failover bench), BASE_PORT+2000.. and 15222+
# (queues-curve.sh's groups), 14222+ (NATS) and 22379+ (etcd; PORT_BASE moves either, as they run
# one after the other); stops whatever it started.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$HOME/go/bin:$PATH"
peers=scripts/peers/nats/run.sh
etcd=scripts/peers/etcd/run.sh
BASE_PORT=${BASE_PORT:-10911}
addrs="127.0.0.1:$BASE_PORT,127.0.0.1:$((BASE_PORT + 1)),127.0.0.1:$((BASE_PORT + 2))"
# SHORT=1: each step once, short runs, a two-kill failover, no queue curve.
d=10s d2=20s reps3="1 2 3" reps2="1 2" kills=20
if [ "${SHORT:-0}" = 1 ]; then
  d=2s d2=2s reps3=1 reps2=1 kills=2 QUEUES=0
  export SYNC_DUR=2s ASYNC_DUR=2s CONSUME_DUR=4s DUR=2s QUIET_WAIT=0 RETRIES=0
fi
data=$(mktemp -d "${TMPDIR:-/tmp}/raftmq-compare.XXXXXX")
reports=bench-results/compare-$(date +%Y%m%d-%H%M%S)
mkdir -p "$reports"
runs=0

. scripts/group.sh
trap 'stop_group; rm -rf "$data"' EXIT


# run prints one bench result and each process's CPU per message.
run() {
  local pids before after out n
  pids=$(pgrep -f "broker --id .* --data $data/group/" | tr '\n' ' ')
  before=$(for p in $pids; do awk '{print $14+$15}' "/proc/$p/stat"; done | paste -sd' ')
  runs=$((runs + 1))
  out=$(/usr/bin/time -f 'CLIENTCPU %U %S' ./raftmq bench "$@" --addr "$addrs" --html "$(printf '%s/%02d-%s.html' "$reports" "$runs" "$1")" 2>&1)
  after=$(for p in $pids; do awk '{print $14+$15}' "/proc/$p/stat"; done | paste -sd' ')
  echo "$out" | grep -E 'messages of'
  n=$(echo "$out" | grep -oE '[0-9]+ messages of' | grep -oE '^[0-9]+' | tail -1)
  echo "$out" | awk -v n="$n" -v b="$before" -v a="$after" -v p="$pids" '
    /CLIENTCPU/ { c = ($2 + $3) * 1e6 / n }
    END {
      split(b, B, " "); split(a, A, " "); k = split(p, P, " ")
      printf "  CPU us/msg:"
      for (i = 1; i <= k; i++) printf " broker %s %.1f", P[i], (A[i] - B[i]) * 1e4 / n
      printf " client %.1f\n", c
    }'
}

echo "== build"
go build -o raftmq ./cmd/raftmq
if [ "${NATS:-1}" != 0 ]; then
  if [ -x "$peers" ]; then
    echo "== NATS JetStream R3, default sync (every 2 min)"
    { "$peers" 2>&1 | grep -E '^(sync|async|consume) |^!!'; } || echo "!! the NATS run failed"
    echo "== NATS JetStream R3, sync=always"
    { SYNC=always "$peers" 2>&1 | grep -E '^(sync|async|consume) |^!!'; } || echo "!! the NATS run failed"
  else
    echo "== NATS: $peers not found, skipped"
  fi
fi
if [ "${ETCD:-1}" != 0 ]; then
  if [ -x "$etcd" ]; then
    echo "== etcd, three members, fsync (one put at a time, then 256 clients)"
    { "$etcd" 2>&1 | grep -E '^put |^!!'; } || echo "!! the etcd run failed"
  else
    echo "== etcd: $etcd not found, skipped"
  fi
fi
fresh_group --base-port "$BASE_PORT"
echo "== raftmq: one send at a time"
for _ in $reps2; do run produce --window 1 --duration "$d"; done
echo "== raftmq: pipelined, one request per message"
for _ in $reps3; do run produce --window 1000 --duration "$d"; done
echo "== raftmq: pipelined, auto-batching client"
for _ in $reps3; do run produce --window 1000 --duration "$d" --auto-batch; done
echo "== raftmq: consume everything above, 32 per pull"
for _ in $reps3; do run consume; done
echo "== raftmq: consume everything above, pulls alternating with push consumers of a new group (32 per pull, a callback per pull; 1, then 2 consumers)"
for n in 1 2; do run consume; run consume --push --consumers "$n"; done
echo "== raftmq: consume, 64 and 128 per pull"
run consume --batch 64
run consume --batch 128
fresh_group --base-port "$BASE_PORT"
echo "== raftmq: batches of 32, window 64"
for _ in $reps2; do run produce --window 64 --batch 32 --duration "$d2"; done
fresh_group --base-port "$BASE_PORT"
echo "== raftmq: pipelined, auto-batching, 20 s from a fresh group, then consume"
run produce --window 1000 --duration "$d2" --auto-batch
for _ in $reps2; do run consume; done
stop_group
echo "== raftmq: kill -9 of the leader under load, $kills times"
./raftmq bench failover --kills "$kills" --base-port "$((BASE_PORT + 1000))" --html "$reports/failover.html" 2>&1 | grep '^failover:'
if [ "${QUEUES:-1}" != 0 ]; then
  echo "== raftmq and NATS R3: pipelined sends over 4, 64, 1,024 and 8,192 queues (subjects), consume at 4 and 1,024 (scripts/queues-curve.sh)"
  NATS="${NATS:-1}" BASE_PORT=$((BASE_PORT + 2000)) ./scripts/queues-curve.sh | grep -v '^== build'
fi
echo "== reports in $reports"
