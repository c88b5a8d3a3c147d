#!/usr/bin/env bash
# nats-ab.sh: raftmq (fsync on a quorum before every ack) against NATS
# JetStream R3 (file storage; by default NATS syncs every 2 minutes, so its
# acks do not wait for a disk), in alternating rounds, each on a fresh
# three-node group / cluster, with the day's fdatasync latency measured in
# every round: the pipelined and one-at-a-time comparison with NATS in
# docs/benchmarks.md.
#
#   ./scripts/nats-ab.sh                       # 3 rounds of 10 s runs (~12 min)
#   ROUNDS=1 DURATION=5s ./scripts/nats-ab.sh  # a quick look
#   NATS_SYNC=always ./scripts/nats-ab.sh      # NATS fsyncing too
#   BROKER_CONFIG=b.yaml ./scripts/nats-ab.sh  # a broker config file for raftmq's nodes
#
# Per round: fdatasync p50 of 1 KiB appends (scripts/peers/fsync), NATS's
# one-at-a-time publish (p50) and pipelined publish (window 1000), then
# raftmq's one send at a time (p50) and pipelined auto-batched sends
# (window 1000). Prints one line per run and a summary table with ratios.
# Uses ports 13811-13833 (raftmq) and 14222+ (NATS); stops what it started.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$HOME/go/bin:$PATH"
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
NATS_SYNC=${NATS_SYNC:-default}
peers=scripts/peers
data=$(mktemp -d "${TMPDIR:-/tmp}/raftmq-natsab.XXXXXX")
out=$data/results.txt

. scripts/group.sh
trap 'stop_group; rm -rf "$data/group"' EXIT


bench() {
  ./raftmq bench produce --addr 127.0.0.1:13811,127.0.0.1:13812,127.0.0.1:13813 --duration "$DURATION" --json "$@" 2>/dev/null | tail -1
}

echo "== build"
go build -o raftmq ./cmd/raftmq
[ -x "$peers/nats/run.sh" ] || { echo "no $peers/nats/run.sh"; exit 1; }
for r in $(seq 1 "$ROUNDS"); do
  echo "== round $r: fdatasync"
  fs=$( (cd "$peers/fsync" && go run . -dir "$data" -size 1024 -duration 2s) 2>&1 | awk '/^fsync / { for (i = 1; i <= NF; i++) if ($i ~ /^p50_us=/) { sub("p50_us=", "", $i); print $i } }' | head -1)
  echo "fdatasync $r p50_us=$fs" | tee -a "$out"
  echo "== round $r: NATS JetStream R3 sync=$NATS_SYNC"
  SYNC=$NATS_SYNC SYNC_DUR=$DURATION ASYNC_DUR=$DURATION QUIET_WAIT=0 "$peers/nats/run.sh" 2>&1 |
    awk -v r="$r" '/^(sync|async) / { m = $1; rate = ""; p50 = ""; for (i = 1; i <= NF; i++) { if ($i == "msgs/s") rate = $(i-1); if ($i ~ /^p50=/) { p50 = $i; sub("p50=", "", p50); sub("us", "", p50) } } print "nats " r " " m " rate=" rate " p50_us=" p50 }' | tee -a "$out"
  echo "== round $r: raftmq"
  fresh_group --base-port 13811 ${BROKER_CONFIG:+--broker-config "$BROKER_CONFIG"}
  bench --window 1 | awk -v r="$r" '{ print "raftmq " r " sync " $0 }' | tee -a "$out"
  bench --window 1000 --auto-batch | awk -v r="$r" '{ print "raftmq " r " async " $0 }' | tee -a "$out"
  stop_group
done
echo "== summary (msgs/s and p50 per round; ratio raftmq / NATS)"
python3 - "$out" <<'PY'
import json, re, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split(None, 3)
    if f[0] == "fdatasync":
        v = line.split("p50_us=")[1].strip()
        rows.setdefault(f[1], {})["fsync"] = float(v) if v else 0
    elif f[0] == "nats":
        kv = dict(x.split("=") for x in f[3].split())
        rows.setdefault(f[1], {})["nats_" + f[2]] = (float(kv["rate"]), float(kv["p50_us"]))
    elif f[0] == "raftmq":
        j = json.loads(f[3])
        rows.setdefault(f[1], {})["raftmq_" + f[2]] = (float(j["msgsPerSec"]), 1000 * float(j.get("p50ms", 0)))
print("| round | fdatasync p50 | NATS pipelined | raftmq pipelined | ratio | NATS one at a time p50 | raftmq p50 | ratio |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for r in sorted(rows, key=int):
    d = rows[r]
    na, ra = d.get("nats_async", (0, 0)), d.get("raftmq_async", (0, 0))
    ns, rs = d.get("nats_sync", (0, 0)), d.get("raftmq_sync", (0, 0))
    ratio = lambda a, b: "%.2f" % (a / b) if b else "-"
    print("| %s | %.0f us | %.1f k | %.1f k | %s | %.0f us | %.0f us | %s |" % (r, d.get("fsync", 0), na[0] / 1e3, ra[0] / 1e3, ratio(ra[0], na[0]), ns[1], rs[1], ratio(rs[1], ns[1])))
PY
