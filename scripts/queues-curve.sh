#!/usr/bin/env bash
# queues-curve.sh: how pipelined sends and consumption depend on the number
# of queues (the many-queues curve of docs/benchmarks.md), next to NATS JetStream R3 with as many subjects,
# measured in the same run.
#
#   ./scripts/queues-curve.sh                                 # 4, 64, 1024, 8192 queues, 10 s per run
#   DURATION=3s POINTS="4 1024" NATS=0 ./scripts/queues-curve.sh   # a short version (CI, a quick look)
#
# Settings (environment):
#   DURATION   length of each produce run (default 10s)
#   POINTS     total queue counts to measure (default "4 64 1024 8192"); a
#              point may also be given as TOPICSxQUEUES, e.g. 1x1024
#   CONSUME    the points (total queues) that also measure consumption
#              (default "4 1024"; CONSUME=0 measures none, as for a
#              quick A/B of produce)
#   CONSUME_MSGS  messages each consume run reads (default 200000)
#   NATS       0 skips NATS JetStream (default 1)
#   BASE_PORT  the raftmq group's first client port (default 12911; the
#              group takes BASE_PORT..BASE_PORT+22)
#   NATS_PORT  the NATS servers' first client port (default 15222; cluster
#              ports NATS_PORT+2000..)
#   NATS_RATE  publishes/s assumed for NATS's first run (default 30000): its
#              bench tool sends a count, not for a time (below)
#   PEERS_WORK scratch directory for the NATS binaries (default
#              /tmp/peers-work, as scripts/peers/nats/run.sh)
#   BIN        the raftmq binary to measure (default: ./raftmq, built
#              first). Comparing two builds: run the script with each
#              binary in turn, alternating, and compare the ratios, e.g.
#                for b in /tmp/old/raftmq ./raftmq /tmp/old/raftmq ./raftmq; do
#                  BIN=$b DURATION=10s POINTS="4 1024 8192" NATS=0 CONSUME=0 ./scripts/queues-curve.sh
#                done
#
# Layout. Up to 64 queues a point is one topic (1x4, 1x64); above that it
# is topics of 8 queues (1024 = 128x8, 8192 = 1024x8). That is how a
# RocketMQ deployment grows: many topics of a few queues each (8 is what
# RocketMQ's `mqadmin updateTopic` and its template topic TBW102 give a
# topic), not one topic of thousands of queues; and it exercises both costs that grow with the layout, per topic
# (topic config, routes) and per queue (a consume queue's files, its
# index state). Every send goes to a queue chosen round robin over all
# topics and queues (bench produce --topics/--queues), so all queues get
# the same share.
#
# Each point starts a fresh three-node group (fresh_group, scripts/group.sh)
# and first sends exactly one message to each queue (bench produce
# --messages N, window 1000): what the first message to a queue costs
# (creating its files), given as queues per second, and waits until every
# node has created them (the first checkpoint after a queue's first message
# creates its file). Then it sends for
# DURATION to queues that all exist: the figure of the curve, with the
# brokers' CPU per message over that run (user + system time of the three
# broker processes from /proc, in µs, over the messages sent). Then, at the CONSUME points, it fills as many other topics
# of the same layout (fill, fill-0, ...) with CONSUME_MSGS messages (in
# batches of 32, not timed) and reads them back with one puller per queue
# (bench consume --topics/--queues): every point consumes the same number
# of messages, so that its rate does not depend on how fast the point
# produced. Every figure is also given as a ratio to the first point's (4
# queues by default): a flat curve is 1.00 throughout.
#
# NATS. scripts/peers/nats/run.sh starts a three-node cluster and
# runs its jsbench, which publishes to one subject only and cannot be told
# otherwise. So this script starts the same cluster itself (the same
# nats-server build and configuration as run.sh: default sync_interval,
# file storage) and measures with the NATS CLI's `nats bench` (natscli,
# pinned below), whose --multisubject --multisubjectmax N publishes
# round robin over N subjects of one R3 stream (first one message to each
# subject, then for about DURATION, as for raftmq). One stream is NATS's unit
# of replication (a raft group), as a raftmq group's commit log is; its
# subjects play the part of the queues. Differences to keep in mind:
# `nats bench js pub async --batch 1000` publishes 1000 messages, then
# waits for all their acks (raftmq's bench keeps 1000 in flight all the
# time, as run.sh's jsbench does); and it sends a number of messages, not
# for a time, so the script sizes each run from the last measured rate to
# last about DURATION. Consumption is `nats bench js ordered`, an ordered
# consumer reading the stream's first CONSUME_MSGS messages (the stream is
# topped up to that many first); NATS needs no consumer per subject.
#
# The machine may be shared: the table gives, for each point, the share of
# the machine's CPU that processes other than this script and its children
# used meanwhile (machine-wide busy time from /proc/stat, less this shell's
# own and its waited-for children's). Above a few percent, the point's
# figures are contaminated; run it again.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$HOME/go/bin:$PATH"

DURATION=${DURATION:-10s}
POINTS=${POINTS:-4 64 1024 8192}
CONSUME=${CONSUME:-4 1024}
NATS=${NATS:-1}
BASE_PORT=${BASE_PORT:-12911}
NATS_PORT=${NATS_PORT:-15222}
NATS_RATE=${NATS_RATE:-30000}
CONSUME_MSGS=${CONSUME_MSGS:-200000}
PEERS_WORK=${PEERS_WORK:-/tmp/peers-work}
BIN=${BIN:-}
NATSCLI_VERSION=v0.5.1 # its nats-server and nats.go are those of run.sh's go.mod
peers=scripts/peers/nats
bin=$PEERS_WORK/bin

data=$(mktemp -d "${TMPDIR:-/tmp}/raftmq-queues.XXXXXX")
results=$data/results.tsv # point, system, figure, msgs/s
: >"$results"
addrs="127.0.0.1:$BASE_PORT,127.0.0.1:$((BASE_PORT + 1)),127.0.0.1:$((BASE_PORT + 2))"
nurls="nats://127.0.0.1:$NATS_PORT,nats://127.0.0.1:$((NATS_PORT + 1)),nats://127.0.0.1:$((NATS_PORT + 2))"
npids=()

stop_nats() {
  local p
  for p in "${npids[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  for p in "${npids[@]:-}"; do [ -n "$p" ] && wait "$p" 2>/dev/null || true; done
  npids=()
}
. scripts/group.sh
trap 'stop_group; stop_nats; rm -rf "$data"' EXIT

# seconds converts a Go-style duration (500ms, 10s, 2m) to seconds.
seconds() {
  awk -v d="$1" 'BEGIN {
    if (d ~ /ms$/) { sub(/ms$/, "", d); print d / 1000 }
    else if (d ~ /m$/) { sub(/m$/, "", d); print d * 60 }
    else { sub(/s$/, "", d); print d + 0 }
  }'
}

# layout prints a point's topics and queues per topic.
layout() {
  case $1 in
  *x*) echo "${1%x*} ${1#*x}" ;;
  *)
    if [ "$1" -le 64 ]; then
      echo "1 $1"
    elif [ $(($1 % 8)) -eq 0 ]; then
      echo "$(($1 / 8)) 8"
    else
      echo "queues-curve: $1 queues above 64 must be a multiple of 8 (or say TOPICSxQUEUES)" >&2
      exit 2
    fi
    ;;
  esac
}

hz=$(getconf CLK_TCK)
ncpu=$(nproc)
# busy_ticks: the machine's non-idle CPU ticks; own_ticks: this shell's and
# its finished children's (the groups, servers and benches it waited for).
busy_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat; }
own_ticks() { sed 's/^.*) //' "/proc/$$/stat" | awk '{ print $12 + $13 + $14 + $15 }'; }

record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$results"; }


# raftmq_bench runs one bench, prints its result line (and the topic
# creation summary) and records its msgs/s as figure $2 of point $1.
raftmq_bench() {
  local point=$1 figure=$2 out rate
  shift 2
  if ! out=$("$raftmq" bench "$@" --addr "$addrs" 2>"$data/bench.err"); then
    echo "  raftmq $figure failed:"; tail -3 "$data/bench.err" | sed 's/^/    /'
    record "$point" raftmq "$figure" ""
    return
  fi
  grep -a '^created ' "$data/bench.err" | sed 's/^/  /' || true
  echo "  $out"
  echo "$out" >"$data/$figure.out"
  rate=$(echo "$out" | grep -oE '[0-9]+ msgs/s' | head -1 | grep -oE '^[0-9]+')
  record "$point" raftmq "$figure" "$rate"
}

# settle waits (up to 60 s) until every node has a file for each of the
# $1 queues: a queue's first file is created by the first checkpoint after
# its first message, which the touch run does not wait for, so without this
# the creation of thousands of files (~50 µs each here) would land in the
# timed run, which is meant to measure sends to queues that exist. A
# checkpoint follows an applied entry only, so every 2 s it sends one more
# message (to the first queue: bench produce with the rest of the
# arguments, $2...) until the files are there.
settle() {
  local i n c ok want=$1
  shift
  for i in $(seq 1 120); do
    ok=1
    for n in "$data"/group/n*; do
      c=$(find "$n" -path '*/consumequeue/*' -type f 2>/dev/null | wc -l)
      [ "$c" -ge "$want" ] || ok=0
    done
    [ "$ok" = 1 ] && return
    if [ $((i % 4)) = 0 ]; then
      "$raftmq" bench produce --addr "$addrs" "$@" --messages 1 --size 1024 >/dev/null 2>&1 || true
    fi
    sleep 0.5
  done
  echo "  (queue files still being created after 60 s)"
}

# broker_ticks prints the CPU ticks (user + system) the group's brokers
# have used so far, summed.
broker_ticks() {
  local p t=0
  for p in $(pgrep -P "$group" || true); do
    t=$((t + $(sed 's/^.*) //' "/proc/$p/stat" | awk '{ print $12 + $13 }')))
  done
  echo "$t"
}

# record_cpu records the brokers' CPU per message (µs, leader and both
# followers together) of the produce run of point $1, from the ticks $2
# before and $3 after it and the messages that run sent.
record_cpu() {
  local n
  [ -s "$data/produce.out" ] || return 0
  n=$(grep -aoE '[0-9]+ messages of' "$data/produce.out" | head -1 | grep -oE '^[0-9]+')
  [ -n "$n" ] && [ "$n" -gt 0 ] || return 0
  record "$1" raftmq cpu "$(awk -v a="$2" -v b="$3" -v hz="$hz" -v n="$n" 'BEGIN { printf "%.1f", (b - a) / hz * 1e6 / n }')"
}

# fresh_nats starts three new NATS servers as run.sh configures them.
fresh_nats() {
  stop_nats
  rm -rf "$data/nats"
  local i d routes=""
  for i in 0 1 2; do routes="$routes${routes:+, }nats-route://127.0.0.1:$((NATS_PORT + 2000 + i))"; done
  for i in 0 1 2; do
    d=$data/nats/n$i
    mkdir -p "$d/store"
    cat >"$d/nats.conf" <<EOF
server_name: n$i
listen: 127.0.0.1:$((NATS_PORT + i))
jetstream {
  store_dir: "$d/store"
  max_memory_store: 1G
  max_file_store: 20G
}
cluster {
  name: bench
  listen: 127.0.0.1:$((NATS_PORT + 2000 + i))
  routes: [$routes]
}
EOF
    env ${SERVER_GOMAXPROCS:+GOMAXPROCS=$SERVER_GOMAXPROCS} "$bin/nats-server" -c "$d/nats.conf" >"$d/server.log" 2>&1 &
    npids+=($!)
  done
  for i in 0 1 2; do
    for _ in $(seq 1 100); do
      (exec 3<>"/dev/tcp/127.0.0.1/$((NATS_PORT + i))") 2>/dev/null && break
      sleep 0.1
    done
  done
}

# nats_cli runs the NATS CLI against the servers, with its settings kept
# in the scratch directory.
nats_cli() { XDG_CONFIG_HOME=$data/natscli "$bin/nats" -s "$nurls" "$@"; }

# nats_rate prints the msgs/s of a `nats bench` stats line in file $1.
nats_rate() { grep -a 'stats:' "$1" | head -1 | grep -oE '[0-9,]+ msgs/sec' | tr -d ',' | grep -oE '^[0-9]+'; }

# nats_pub publishes $5 messages, or about DURATION's worth (at rate $3)
# without $5, over $2 subjects of stream qc (created on first use), prints
# and records the rate as figure $4 of point $1, and leaves the count sent
# in $sent.
nats_pub() {
  local point=$1 subjects=$2 guess=$3 figure=$4 rate
  sent=${5:-$(awk -v r="$guess" -v s="$(seconds "$DURATION")" 'BEGIN { n = int(r * s); print (n < 1000 ? 1000 : n) }')}
  for _ in $(seq 1 60); do
    # Right after start the servers may not agree on a meta leader yet:
    # creating the stream fails until they do, before anything is sent.
    if nats_cli bench js pub async qc --stream qc --create --storage file --replicas 3 --maxbytes 16GB \
      --multisubject --multisubjectmax "$subjects" --batch 1000 --msgs "$sent" --size 1024 --no-progress >"$data/nats.out" 2>&1; then
      break
    fi
    grep -aqE 'could not create the stream|could not access stream|no responders|temporarily unavailable' "$data/nats.out" || break
    sleep 0.5
  done
  rate=$(nats_rate "$data/nats.out" || true)
  if [ -z "$rate" ]; then
    echo "  NATS $figure failed:"; tail -3 "$data/nats.out" | sed 's/^/    /'
    sent=0
  else
    echo "  NATS publish $figure, $subjects subjects: $sent messages of 1 KiB: $rate msgs/s"
  fi
  record "$point" nats "$figure" "$rate"
  [ -n "${5:-}" ] || last_rate=${rate:-$guess}
}

if [ -n "$BIN" ]; then
  raftmq=$BIN
  echo "== measuring $raftmq"
else
  echo "== build"
  go build -o raftmq ./cmd/raftmq
  raftmq=./raftmq
fi
GROUP_BIN=$raftmq
if [ "$NATS" != 0 ]; then
  if [ -d "$peers" ] &&
    (cd "$peers" && go build -o "$bin/nats-server" github.com/nats-io/nats-server/v2) &&
    GOBIN=$bin go install "github.com/nats-io/natscli/nats@$NATSCLI_VERSION"; then
    echo "$("$bin/nats-server" --version), natscli $NATSCLI_VERSION"
  else
    echo "== NATS: could not build nats-server ($peers) or natscli $NATSCLI_VERSION; NATS skipped"
    NATS=0
  fi
fi

echo "== pipelined 1 KiB sends (window 1000, one producer), $DURATION per run; points: $POINTS; consume at: $CONSUME"
last_rate=$NATS_RATE
for point in $POINTS; do
  lay=$(layout "$point")
  read -r topics queues <<<"$lay"
  total=$((topics * queues))
  load=$(cut -d' ' -f1 /proc/loadavg)
  record "$point" info layout "$topics x $queues"
  record "$point" info total "$total"
  echo "== $total queues: $topics topic(s) x $queues queues (load1 before: $load)"
  t0=$(date +%s.%N) b0=$(busy_ticks) o0=$(own_ticks)
  fresh_group --base-port "$BASE_PORT"
  raftmq_bench "$point" touch produce --topics "$topics" --queues "$queues" --messages "$total" --window 1000 --size 1024 --duration 10m
  settle "$total" --topics "$topics" --queues "$queues"
  rm -f "$data/produce.out"
  c0=$(broker_ticks)
  raftmq_bench "$point" produce produce --topics "$topics" --queues "$queues" --window 1000 --size 1024 --duration "$DURATION"
  record_cpu "$point" "$c0" "$(broker_ticks)"
  consume=0
  for c in $CONSUME; do [ "$c" = "$total" ] && consume=1; done
  if [ "$consume" = 1 ]; then
    if "$raftmq" bench produce --addr "$addrs" --topic fill --topics "$topics" --queues "$queues" --messages "$CONSUME_MSGS" \
      --batch 32 --window 64 --size 1024 --duration 10m >"$data/fill.out" 2>"$data/bench.err"; then
      echo "  filled $topics topic(s) fill* with $CONSUME_MSGS messages to consume"
      raftmq_bench "$point" consume consume --topic fill --topics "$topics" --queues "$queues"
    else
      echo "  raftmq fill failed:"; tail -3 "$data/bench.err" | sed 's/^/    /'
      record "$point" raftmq consume ""
    fi
  fi
  stop_group
  if [ "$NATS" != 0 ]; then
    fresh_nats
    nats_pub "$point" "$total" "$last_rate" touch "$total"
    n1=$sent
    nats_pub "$point" "$total" "$last_rate" produce
    n=$((n1 + sent))
    if [ "$consume" = 1 ] && [ "$n" -gt 0 ]; then
      # Top the stream up to CONSUME_MSGS (the consumer would wait for
      # messages that never come), then read that many.
      if { [ "$n" -ge "$CONSUME_MSGS" ] || nats_cli bench js pub async qc --stream qc --multisubject --multisubjectmax "$total" \
        --batch 1000 --msgs $((CONSUME_MSGS - n)) --size 1024 --no-progress >"$data/nats.out" 2>&1; } &&
        XDG_CONFIG_HOME=$data/natscli timeout 600 "$bin/nats" -s "$nurls" bench js ordered --stream qc --msgs "$CONSUME_MSGS" \
          --size 1024 --no-progress >"$data/nats.out" 2>&1 &&
        rate=$(nats_rate "$data/nats.out"); then
        echo "  NATS consume (ordered consumer), $total subjects: $CONSUME_MSGS messages: $rate msgs/s"
      else
        echo "  NATS consume failed:"; tail -3 "$data/nats.out" | sed 's/^/    /'
        rate=""
      fi
      record "$point" nats consume "$rate"
    fi
    stop_nats
  fi
  t1=$(date +%s.%N) b1=$(busy_ticks) o1=$(own_ticks)
  others=$(awk -v t="$t0" -v T="$t1" -v b="$b0" -v B="$b1" -v o="$o0" -v O="$o1" -v hz="$hz" -v n="$ncpu" \
    'BEGIN { f = ((B - b) - (O - o)) / hz; if (f < 0) f = 0; printf "%.0f%%", 100 * f / ((T - t) * n) }')
  record "$point" info others "$others"
  echo "  other processes used $others of the machine's CPU during this point"
done

echo "== table: msgs/s, and in brackets the ratio to the $(echo "$POINTS" | awk '{print $1}')-queue point's figure (1.00 = no loss)"
echo "   1st msg: one message to each queue of a fresh group, in queues/s (it creates their files), no ratio;"
echo "   produce: then sending for DURATION=$DURATION; consume: $CONSUME_MSGS messages read back;"
echo "   others: CPU share of the machine used by other processes during the point (contaminated above a few %)"
awk -F'\t' -v nats="$NATS" '
  # cell: figure k of point p and its ratio to that of the first point; "-"
  # where it was not measured, "failed" where the run failed.
  function cell(p, k,   v, b) {
    if (!((p, k) in fig)) return sprintf("%-17s", "-")
    v = fig[p, k]; b = fig[first, k]
    if (v == "") return sprintf("%-17s", "failed")
    if (b > 0 && k ~ /cpu/) return sprintf("%-17s", sprintf("%.1f (%.2f)", v, v / b))
    if (b > 0 && k !~ /touch/) return sprintf("%-17s", sprintf("%d (%.2f)", v, v / b))
    return sprintf("%-17s", v)
  }
  {
    if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 }
    if ($2 == "info") info[$1, $3] = $4
    else fig[$1, $2 "/" $3] = $4
  }
  END {
    first = order[1]
    printf "%-7s %-11s %-6s | %-17s %-17s %-17s %-17s", "queues", "layout", "others", "raftmq 1st msg", "raftmq produce", "CPU µs/msg", "raftmq consume"
    if (nats != 0) printf "| %-17s %-17s %-17s", "NATS 1st msg", "NATS produce", "NATS consume"
    printf "\n"
    for (i = 1; i <= n; i++) {
      p = order[i]
      printf "%-7s %-11s %-6s | %s %s %s %s", info[p, "total"], info[p, "layout"], info[p, "others"], cell(p, "raftmq/touch"), cell(p, "raftmq/produce"), cell(p, "raftmq/cpu"), cell(p, "raftmq/consume")
      if (nats != 0) printf "| %s %s %s", cell(p, "nats/touch"), cell(p, "nats/produce"), cell(p, "nats/consume")
      printf "\n"
    }
  }' "$results"
