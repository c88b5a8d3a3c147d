# group.sh, sourced by the benchmark scripts: one local three-node group
# (`raftmq cluster`) at a time, in $data/group, its output in
# $data/cluster.log. Set data before sourcing; GROUP_BIN is the raftmq
# binary (default ./raftmq). Also the A/B scripts' shared steps: the new
# binary and the measurement lock.
group=""

# stop_group stops the running group, if any, and waits for it.
stop_group() {
  if [ -n "$group" ]; then
    kill -INT "$group" 2>/dev/null || true
    wait "$group" 2>/dev/null || true
    group=""
  fi
}

# fresh_group [cluster flags...] starts a new group on empty data, waits
# for a leader, then gives the warm-up 5 s to zero ahead of the writer.
fresh_group() {
  stop_group
  rm -rf "$data/group"
  "${GROUP_BIN:-./raftmq}" cluster --demo 0 --data "$data/group" "$@" >"$data/cluster.log" 2>&1 &
  group=$!
  for _ in $(seq 1 80); do
    grep -aq 'leader elected' "$data/cluster.log" && break
    sleep 0.25
  done
  grep -aq 'leader elected' "$data/cluster.log" || { cat "$data/cluster.log"; exit 1; }
  sleep 5
}

# new_binary sets NEW, when unset, to a fresh build of this tree in $data.
new_binary() {
  if [ -z "${NEW:-}" ]; then
    echo "== build"
    go build -o "$data/raftmq-new" ./cmd/raftmq
    NEW=$data/raftmq-new
  fi
}

# hold_lock holds LOCK (if set) on descriptor 9 until the script ends, so
# that two scripts never measure at once.
hold_lock() {
  if [ -n "$LOCK" ]; then
    exec 9>"$LOCK"
    flock 9
  fi
}

# scratch NAME makes $data (a new directory under TMPDIR) and $out (its
# results.txt), and stops the group and removes them at exit.
scratch() {
  data=$(mktemp -d "${TMPDIR:-/tmp}/raftmq-$1.XXXXXX")
  out=$data/results.txt
  trap 'stop_group; rm -rf "$data"' EXIT
}

# alternate FN runs FN WHICH on a fresh group (GROUP_BIN is OLD or NEW) for
# ROUNDS rounds, WHICH old then new, the order swapped every other round.
# OLD_FLAGS and NEW_FLAGS are extra `raftmq cluster` flags for each side
# (e.g. OLD=NEW=./raftmq NEW_FLAGS="--grpc-transport lean": one binary,
# two settings).
alternate() {
  local r which order
  for r in $(seq 1 "$ROUNDS"); do
    order="old new"
    [ $((r % 2)) = 0 ] && order="new old"
    for which in $order; do
      local flags
      if [ "$which" = old ]; then GROUP_BIN=$OLD flags=${OLD_FLAGS:-}; else GROUP_BIN=$NEW flags=${NEW_FLAGS:-}; fi
      echo "== round $r: $which ($GROUP_BIN $flags)"
      # shellcheck disable=SC2086 # flags are words
      fresh_group --base-port "$BASE_PORT" $flags
      "$1" "$which"
      stop_group
    done
  done
}

# cpu PID prints the CPU time (user + system, in clock ticks) the process
# has used so far.
cpu() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# group_leader HTTP_PORT prints the raft leader's node ID as the node
# serving HTTP_PORT knows it.
group_leader() {
  curl -s "127.0.0.1:$1/status" | python3 -c 'import json, sys; print(json.load(sys.stdin)["raft"]["leader"])'
}
