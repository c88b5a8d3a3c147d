#!/usr/bin/env bash
# grpc-ab.sh: gRPC sends against remoting sends, for two raftmq binaries in
# alternating rounds, each on a fresh three-node group, with the CPU each
# process spent per message (this VM's throughput follows it).
#
#   OLD=/tmp/base/raftmq ./scripts/grpc-ab.sh          # NEW defaults to a fresh build of this tree
#   ROUNDS=2 DURATION=3s OLD=... ./scripts/grpc-ab.sh  # a quick look
#   OLD=./raftmq NEW=./raftmq OLD_FLAGS=... NEW_FLAGS=... ./scripts/grpc-ab.sh   # one binary, two settings
#
# Per round and binary (the order alternates between rounds): remoting
# then gRPC with 4 producers x 64 calls in flight, then one send at a time
# over each. Each run prints msgs/s, p50, the CPU per message of the
# leader, each follower (utime+stime of /proc/<pid>/stat) and the bench
# client (/usr/bin/time), the messages per raft entry and the load
# average; at the end, medians per binary: gRPC/remoting pipelined, the
# one-at-a-time p50s and the CPU figures.
# Uses ports 16911-16943 (BASE_PORT moves them: clients +0..2, raft
# +10..12, HTTP +20..22, gRPC +30..32); stops what it started.
# Measurements hold LOCK (default /tmp/raftmq-bench.lock; empty: none).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$HOME/go/bin:$PATH"
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5s}
BASE_PORT=${BASE_PORT:-16911}
LOCK=${LOCK-/tmp/raftmq-bench.lock}
: "${OLD:?set OLD to the baseline raftmq binary}"
. scripts/group.sh
scratch grpc-ab

new_binary

http=$((BASE_PORT + 20))
entries() { curl -s "127.0.0.1:$1/metrics" | awk '/^raftmq_entry_requests_sum/ { s = $2 } /^raftmq_entry_requests_count/ { c = $2 } END { print s + 0, c + 0 }'; }

# run WHICH KIND bench-flags...: one bench run and its line in $out.
run() {
  local which=$1 kind=$2
  shift 2
  local leader pids=() c0=() c1=() e0 e1 res
  leader=$(group_leader "$http")
  for n in 1 2 3; do
    pids[n]=$(pgrep -f "broker --id $n --data $data/group/n$n")
    c0[n]=$(cpu "${pids[n]}")
  done
  e0=$(entries $((http + leader - 1)))
  res=$(/usr/bin/time -f "TIME %U %S" "$GROUP_BIN" bench produce --json --duration "$DURATION" \
    --addr "127.0.0.1:$BASE_PORT,127.0.0.1:$((BASE_PORT + 1)),127.0.0.1:$((BASE_PORT + 2))" "$@" 2>&1 | grep -E '^(\{|TIME)')
  e1=$(entries $((http + leader - 1)))
  for n in 1 2 3; do c1[n]=$(cpu "${pids[n]}"); done
  python3 - "$which" "$kind" "$leader" "$res" "${c0[*]}" "${c1[*]}" "$e0" "$e1" <<'PY' | tee -a "$out"
import json, os, sys
which, kind, leader, res, c0, c1, e0, e1 = sys.argv[1:]
lines = res.splitlines()
j = json.loads([l for l in lines if l.startswith("{")][-1])
_, u, s = [l for l in lines if l.startswith("TIME")][-1].split()
n, hz, leader = j["messages"], os.sysconf("SC_CLK_TCK"), int(leader)
per = [(b - a) / hz * 1e6 / n for a, b in zip(map(float, c0.split()), map(float, c1.split()))]
fol = [p for i, p in enumerate(per) if i != leader - 1]
(s0, k0), (s1, k1) = map(float, e0.split()), map(float, e1.split())
print(json.dumps({"which": which, "kind": kind, "msgsPerSec": round(j["msgsPerSec"]), "p50ms": j["p50ms"],
    "leaderUs": round(per[leader - 1], 1), "followerUs": [round(f, 1) for f in fol],
    "clientUs": round((float(u) + float(s)) * 1e6 / n, 1), "perEntry": round((s1 - s0) / max(1, k1 - k0)),
    "load": os.getloadavg()[0]}))
PY
}

# round WHICH: one round's runs on the fresh group. OLD_GRPC_FLAGS and
# NEW_GRPC_FLAGS are extra flags of each side's gRPC runs (e.g.
# "--grpc-client grpc-go").
round() {
  local g
  if [ "$1" = old ]; then g=${OLD_GRPC_FLAGS:-}; else g=${NEW_GRPC_FLAGS:-}; fi
  run "$1" remoting --window 64 --producers 4
  # shellcheck disable=SC2086 # flags are words
  run "$1" grpc --grpc "127.0.0.1:$((BASE_PORT + 30))" --window 64 --producers 4 $g
  run "$1" remoting-one --window 1
  # shellcheck disable=SC2086
  run "$1" grpc-one --grpc "127.0.0.1:$((BASE_PORT + 30))" --window 1 $g
}

hold_lock
alternate round
echo "== medians (CPU in µs per message)"
python3 - "$out" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
def med(which, kind, f):
    return statistics.median(f(r) for r in runs if r["which"] == which and r["kind"] == kind)
print("| binary | gRPC/remoting pipelined | gRPC p50 | remoting p50 | gRPC leader / follower / client | remoting leader / follower / client | gRPC per entry |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for w in ("old", "new"):
    g = [r["msgsPerSec"] for r in runs if r["which"] == w and r["kind"] == "grpc"]
    m = [r["msgsPerSec"] for r in runs if r["which"] == w and r["kind"] == "remoting"]
    cpu = lambda k: "%.0f / %.1f / %.0f" % (med(w, k, lambda r: r["leaderUs"]), med(w, k, lambda r: sum(r["followerUs"]) / 2), med(w, k, lambda r: r["clientUs"]))
    print("| %s | %.2f | %.3f ms | %.3f ms | %s | %s | %d |" % (w, statistics.median(a / b for a, b in zip(g, m)),
          med(w, "grpc-one", lambda r: r["p50ms"]), med(w, "remoting-one", lambda r: r["p50ms"]), cpu("grpc"), cpu("remoting"),
          med(w, "grpc", lambda r: r["perEntry"])))
PY
