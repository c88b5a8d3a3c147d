#!/usr/bin/env bash
# run.sh: a three-node NATS JetStream cluster on 127.0.0.1, measured with
# jsbench: one publish at a time, pipelined publishes, then reading the
# stream back with an ordered and a durable consumer. nats-server and the
# client are built through the Go module proxy at the versions go.mod
# pins.
#
#   scripts/peers/nats/run.sh                 # file storage, NATS's default sync (every 2 minutes)
#   SYNC=always scripts/peers/nats/run.sh     # fsync before each acknowledgement
#   REPLICAS=1 scripts/peers/nats/run.sh      # an R1 stream on the same cluster
#
# Settings (environment): SIZE (1024 bytes), SYNC_DUR (20s), ASYNC_N
# (300000), ASYNC_DUR (30s), WINDOW (1000), CONSUME_DUR (30s), PORT_BASE
# (14222: clients PORT_BASE.., routes PORT_BASE+2000..), SERVER_GOMAXPROCS,
# PEERS_WORK (/tmp/peers-work: binaries, data, results), QUIET_WAIT.
# The servers are stopped and their data removed on exit.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
work=${PEERS_WORK:-/tmp/peers-work}
bin=$work/bin
SYNC=${SYNC:-default}
SIZE=${SIZE:-1024}
SYNC_DUR=${SYNC_DUR:-20s}
ASYNC_N=${ASYNC_N:-300000}
ASYNC_DUR=${ASYNC_DUR:-30s}
WINDOW=${WINDOW:-1000}
CONSUME_DUR=${CONSUME_DUR:-30s}
PORT_BASE=${PORT_BASE:-14222}
REPLICAS=${REPLICAS:-3}
dir=$work/nats-$SYNC
results=${RESULTS:-$work/results/nats-R$REPLICAS-$SYNC${SERVER_GOMAXPROCS:+-gmp$SERVER_GOMAXPROCS}.jsonl}
mkdir -p "$bin" "$(dirname "$results")"

echo "== building nats-server and jsbench (versions of $here/go.mod)"
(cd "$here" && go build -o "$bin/nats-server" github.com/nats-io/nats-server/v2 && go build -o "$bin/jsbench" ./jsbench)
"$bin/nats-server" --version

rm -rf "$dir"
mkdir -p "$dir"
PIDS=()
trap 'stop_pids; rm -rf "$dir"/n*/store' EXIT INT TERM

routes=""
for i in 0 1 2; do routes="$routes${routes:+, }nats-route://127.0.0.1:$((PORT_BASE + 2000 + i))"; done
for i in 0 1 2; do
  mkdir -p "$dir/n$i/store"
  {
    echo "server_name: n$i"
    echo "listen: 127.0.0.1:$((PORT_BASE + i))"
    echo "jetstream {"
    echo "  store_dir: \"$dir/n$i/store\""
    echo "  max_memory_store: 1G"
    echo "  max_file_store: 20G"
    [ "$SYNC" = always ] && echo "  sync_interval: always"
    echo "}"
    echo "cluster {"
    echo "  name: bench"
    echo "  listen: 127.0.0.1:$((PORT_BASE + 2000 + i))"
    echo "  routes: [$routes]"
    echo "}"
  } >"$dir/n$i/nats.conf"
  env ${SERVER_GOMAXPROCS:+GOMAXPROCS=$SERVER_GOMAXPROCS} "$bin/nats-server" -c "$dir/n$i/nats.conf" >"$dir/n$i/server.log" 2>&1 &
  PIDS+=($!)
done
echo "== nats-server PIDs ${PIDS[*]} (sync $SYNC)"
wait_ports "$PORT_BASE" "$((PORT_BASE + 1))" "$((PORT_BASE + 2))"
urls="nats://127.0.0.1:$PORT_BASE,nats://127.0.0.1:$((PORT_BASE + 1)),nats://127.0.0.1:$((PORT_BASE + 2))"

"$bin/jsbench" -url "$urls" -mode setup -replicas "$REPLICAS" -storage file
wait_quiet
label="R$REPLICAS file sync=$SYNC${SERVER_GOMAXPROCS:+ gomaxprocs=$SERVER_GOMAXPROCS}"
js() { measured "$dir/out.txt" "$bin/jsbench" -url "$urls" -size "$SIZE" -replicas "$REPLICAS" -label "$label" "$@"; }
js -mode sync -n 1000000 -duration "$SYNC_DUR"
js -mode async -n "$ASYNC_N" -duration "$ASYNC_DUR" -window "$WINDOW"
js -mode consume -consumer ordered -n 0 -duration "$CONSUME_DUR"
js -mode consume -consumer durable -n 0 -duration "$CONSUME_DUR"
grep '^RESULT ' "$dir/out.txt" | sed 's/^RESULT //' >>"$results"
echo "== results appended to $results"
