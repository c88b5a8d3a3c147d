#!/usr/bin/env bash
# run.sh: a three-member etcd cluster on 127.0.0.1, measured with
# etcdbench: one put at a time, then many clients putting at once (etcd
# fdatasyncs its WAL once per raft batch, so concurrent puts share one).
# etcd and the client are built through the Go module proxy at the
# versions go.mod pins.
#
#   scripts/peers/etcd/run.sh              # WAL fdatasync per raft batch (etcd's default)
#   NOFSYNC=1 scripts/peers/etcd/run.sh    # --unsafe-no-fsync: what the fsync costs
#
# Settings (environment): SIZE (1024 bytes), DUR (20s per run), CLIENTS
# ("1 256"), CONNS (16 gRPC connections), PORT_BASE (22379: clients
# PORT_BASE.., peers PORT_BASE+1000..), SERVER_GOMAXPROCS, PEERS_WORK
# (/tmp/peers-work), QUIET_WAIT. The members are stopped and their data
# removed on exit.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
work=${PEERS_WORK:-/tmp/peers-work}
bin=$work/bin
SIZE=${SIZE:-1024}
DUR=${DUR:-20s}
CLIENTS=${CLIENTS:-1 256}
CONNS=${CONNS:-16}
PORT_BASE=${PORT_BASE:-22379}
tag=fsync
extra=()
if [ "${NOFSYNC:-0}" = 1 ]; then
  tag=nofsync
  extra=(--unsafe-no-fsync)
fi
dir=$work/etcd-$tag
results=${RESULTS:-$work/results/etcd-$tag${SERVER_GOMAXPROCS:+-gmp$SERVER_GOMAXPROCS}.jsonl}
mkdir -p "$bin" "$(dirname "$results")"

echo "== building etcd and etcdbench (versions of $here/go.mod)"
(cd "$here" && go build -o "$bin/etcd" go.etcd.io/etcd/server/v3 && go build -o "$bin/etcdbench" ./etcdbench)
"$bin/etcd" --version | head -1

rm -rf "$dir"
mkdir -p "$dir"
PIDS=()
trap 'stop_pids; rm -rf "$dir"/e*/data' EXIT INT TERM

members=""
for i in 0 1 2; do members="$members${members:+,}e$i=http://127.0.0.1:$((PORT_BASE + 1000 + i))"; done
for i in 0 1 2; do
  mkdir -p "$dir/e$i"
  client=http://127.0.0.1:$((PORT_BASE + i))
  peer=http://127.0.0.1:$((PORT_BASE + 1000 + i))
  env ${SERVER_GOMAXPROCS:+GOMAXPROCS=$SERVER_GOMAXPROCS} "$bin/etcd" --name "e$i" --data-dir "$dir/e$i/data" \
    --listen-client-urls "$client" --advertise-client-urls "$client" \
    --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
    --initial-cluster "$members" --initial-cluster-state new --initial-cluster-token bench \
    --quota-backend-bytes $((8 << 30)) --log-level warn "${extra[@]}" >"$dir/e$i/server.log" 2>&1 &
  PIDS+=($!)
done
echo "== etcd PIDs ${PIDS[*]} ($tag)"
wait_ports "$PORT_BASE" "$((PORT_BASE + 1))" "$((PORT_BASE + 2))"
endpoints="http://127.0.0.1:$PORT_BASE,http://127.0.0.1:$((PORT_BASE + 1)),http://127.0.0.1:$((PORT_BASE + 2))"

# The cluster is ready when one put succeeds (a leader is elected).
ready=0
for _ in $(seq 60); do
  if "$bin/etcdbench" -endpoints "$endpoints" -n 1 -duration 5s >/dev/null 2>&1; then
    ready=1
    break
  fi
  sleep 1
done
[ "$ready" = 1 ] || { echo "!! etcd elected no leader; see $dir/e*/server.log"; exit 1; }
wait_quiet
for c in $CLIENTS; do
  measured "$dir/out.txt" "$bin/etcdbench" -endpoints "$endpoints" -clients "$c" -conns "$(( c < CONNS ? c : CONNS ))" \
    -size "$SIZE" -duration "$DUR" -label "3 members $tag${SERVER_GOMAXPROCS:+ gomaxprocs=$SERVER_GOMAXPROCS}"
done
grep '^RESULT ' "$dir/out.txt" | sed 's/^RESULT //' >>"$results"
echo "== results appended to $results"
