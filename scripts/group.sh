# group.sh, sourced by the benchmark scripts: one local three-node group
# (`raftmq cluster`) at a time, in $data/group, its output in
# $data/cluster.log. Set data before sourcing; GROUP_BIN is the raftmq
# binary (default ./raftmq).
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
