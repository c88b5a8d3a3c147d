#!/usr/bin/env bash
# ab.sh: the send path of two raftmq binaries, in alternating rounds, each
# run on a fresh three-node group: the "no figure worse" check of a change
# (this VM drifts, so only figures from the same rounds compare).
#
#   git worktree add /tmp/base main~3 && (cd /tmp/base && go build -o raftmq ./cmd/raftmq)
#   OLD=/tmp/base/raftmq ./scripts/ab.sh         # NEW defaults to a fresh build of this tree
#   ROUNDS=2 DURATION=5s OLD=... ./scripts/ab.sh # a quick look
#   WARM=20s OLD=... ./scripts/ab.sh             # also one at a time on a warm broker
#
# Per round and binary (the order alternates between rounds): one send at a
# time (window 1), pipelined one request per message (window 1000), and
# pipelined auto-batched sends; with WARM set, then one send at a time for
# WARM unmeasured and once more measured ("one-warm": a broker that has
# written its tail cache full of one-entry appends, as a long-running one
# with one-at-a-time producers has; fresh groups never get there). Prints one line per run and, at the end,
# each figure's median per binary and the ratio new / old.
# Uses ports 13911-13933 (BASE_PORT moves them: clients +0..2, raft
# +10..12, HTTP +20..22); stops what it started. Measurements hold LOCK
# (default /tmp/raftmq-bench.lock; empty: none), so that two scripts never
# measure at once.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$HOME/go/bin:$PATH"
ROUNDS=${ROUNDS:-4}
DURATION=${DURATION:-10s}
WARM=${WARM:-}
BASE_PORT=${BASE_PORT:-13911}
LOCK=${LOCK-/tmp/raftmq-bench.lock}
: "${OLD:?set OLD to the baseline raftmq binary}"
. scripts/group.sh
scratch ab

new_binary

bench() {
  "$GROUP_BIN" bench produce --addr "127.0.0.1:$BASE_PORT,127.0.0.1:$((BASE_PORT + 1)),127.0.0.1:$((BASE_PORT + 2))" --duration "$DURATION" --json "$@" 2>/dev/null | tail -1
}

# round WHICH: one round's runs on the fresh group.
round() {
  local which=$1
  bench --window 1 | awk -v w="$which" '{ print w " one " $0 }' | tee -a "$out"
  bench --window 1000 | awk -v w="$which" '{ print w " pipelined " $0 }' | tee -a "$out"
  bench --window 1000 --auto-batch | awk -v w="$which" '{ print w " auto-batch " $0 }' | tee -a "$out"
  if [ -n "$WARM" ]; then
    DURATION=$WARM bench --window 1 >/dev/null
    bench --window 1 | awk -v w="$which" '{ print w " one-warm " $0 }' | tee -a "$out"
  fi
}

hold_lock
alternate round
echo "== medians (msgs/s, p50 ms); ratio new / old"
python3 - "$out" <<'PY'
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    which, kind, js = line.split(None, 2)
    j = json.loads(js)
    runs.setdefault((kind, which), []).append((float(j["msgsPerSec"]), float(j.get("p50ms", 0))))
print("| run | old msgs/s | new msgs/s | ratio | old p50 | new p50 | ratio |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for kind in ("one", "pipelined", "auto-batch", "one-warm"):
    o, n = runs.get((kind, "old"), []), runs.get((kind, "new"), [])
    if not o or not n:
        continue
    mo, mn = statistics.median(r for r, _ in o), statistics.median(r for r, _ in n)
    po, pn = statistics.median(p for _, p in o), statistics.median(p for _, p in n)
    print("| %s | %.1f k | %.1f k | %.2f | %.2f ms | %.2f ms | %.2f |" % (kind, mo / 1e3, mn / 1e3, mn / mo, po, pn, pn / po if po else 0))
PY
