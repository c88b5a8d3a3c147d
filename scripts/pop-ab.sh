#!/usr/bin/env bash
# pop-ab.sh: pop consumption (receive + ack) for two raftmq binaries in
# alternating rounds, each on a fresh three-node group, next to the pulls
# of the same runs, with the CPU each process spent per message popped.
#
#   OLD=/tmp/base/raftmq ./scripts/pop-ab.sh          # NEW defaults to a fresh build of this tree
#   ROUNDS=2 MESSAGES=20000 OLD=... ./scripts/pop-ab.sh   # a quick look
#
# Per round and binary (the order alternates between rounds): `bench pop`
# sends MESSAGES (default 100,000) and pops them with 16 SimpleConsumers
# over the topic's 4 queues (c16), then pops the same messages again with
# 4 consumers (c4), and with 4 consumers acking in the background, 8 batch
# acks in flight each (async: a RocketMQ 5 PushConsumer's shape). Each run
# prints pop and pull msgs/s, batch ack p50 and p99, and the CPU per
# popped message of the leader, each follower (utime+stime of
# /proc/<pid>/stat) and the bench client (/usr/bin/time), which includes
# the run's pull (and, for c16, its sends); at the end, medians per binary
# and kind. Uses ports 18911-18943 (BASE_PORT moves them); stops what it
# started. Measurements hold LOCK (default /tmp/raftmq-bench.lock; empty:
# none).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$HOME/go/bin:$PATH"
ROUNDS=${ROUNDS:-3}
MESSAGES=${MESSAGES:-100000}
BASE_PORT=${BASE_PORT:-18911}
LOCK=${LOCK-/tmp/raftmq-bench.lock}
: "${OLD:?set OLD to the baseline raftmq binary}"
. scripts/group.sh
scratch pop-ab

new_binary

http=$((BASE_PORT + 20))

# run WHICH KIND bench-flags...: one `bench pop` and its line in $out.
run() {
  local which=$1 kind=$2
  shift 2
  local leader pids=() c0=() c1=() res
  leader=$(group_leader "$http")
  for n in 1 2 3; do
    pids[n]=$(pgrep -f "broker --id $n --data $data/group/n$n")
    c0[n]=$(cpu "${pids[n]}")
  done
  res=$(/usr/bin/time -f "TIME %U %S" "$GROUP_BIN" bench pop --json \
    --addr "127.0.0.1:$BASE_PORT,127.0.0.1:$((BASE_PORT + 1)),127.0.0.1:$((BASE_PORT + 2))" "$@" 2>&1 | grep -E '^(\{|TIME)')
  for n in 1 2 3; do c1[n]=$(cpu "${pids[n]}"); done
  python3 - "$which" "$kind" "$leader" "$res" "${c0[*]}" "${c1[*]}" <<'PY' | tee -a "$out"
import json, os, sys
which, kind, leader, res, c0, c1 = sys.argv[1:]
lines = res.splitlines()
j = json.loads([l for l in lines if l.startswith("{")][-1])
_, u, s = [l for l in lines if l.startswith("TIME")][-1].split()
n, hz, leader = max(1, j["pop"]["messages"]), os.sysconf("SC_CLK_TCK"), int(leader)
per = [(b - a) / hz * 1e6 / n for a, b in zip(map(float, c0.split()), map(float, c1.split()))]
fol = [p for i, p in enumerate(per) if i != leader - 1]
print(json.dumps({"which": which, "kind": kind, "pop": round(j["pop"]["msgsPerSec"]), "pull": round(j["pull"]["msgsPerSec"]),
    "ackP50ms": j["ackP50ms"], "ackP99ms": j["ackP99ms"], "ackFailures": j["ackFailures"],
    "leaderUs": round(per[leader - 1], 1), "followerUs": [round(f, 1) for f in fol],
    "clientUs": round((float(u) + float(s)) * 1e6 / n, 1), "load": os.getloadavg()[0]}))
PY
}

round() {
  run "$1" c16 --messages "$MESSAGES" --consumers 16
  run "$1" c4 --messages 0 --consumers 4
  run "$1" async --messages 0 --consumers 4 --ack-async --acks-in-flight 8
}

hold_lock
alternate round
echo "== medians (CPU in µs per message popped)"
python3 - "$out" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
print("| kind | binary | pop msgs/s | pop/pull | ack p50 / p99 | leader / follower / client CPU |")
print("| --- | --- | --- | --- | --- | --- |")
for k in ("c16", "c4", "async"):
    for w in ("old", "new"):
        rs = [r for r in runs if r["which"] == w and r["kind"] == k]
        if not rs:
            continue
        med = lambda f: statistics.median(f(r) for r in rs)
        print("| %s | %s | %.1f k | %.2f | %.2f / %.2f ms | %.1f / %.1f / %.1f µs |" % (k, w, med(lambda r: r["pop"]) / 1e3,
              med(lambda r: r["pop"] / r["pull"]), med(lambda r: r["ackP50ms"]), med(lambda r: r["ackP99ms"]),
              med(lambda r: r["leaderUs"]), med(lambda r: sum(r["followerUs"]) / 2), med(lambda r: r["clientUs"])))
PY
