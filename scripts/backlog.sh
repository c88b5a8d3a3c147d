#!/usr/bin/env bash
# backlog.sh: a large backlog over many queues (10 GB over 1,024 queues by
# default: recovery, a replaced follower, reads from far behind), on one
# fresh three-node group of `raftmq broker` processes started by this
# script (so that it can kill -9 and restart each one):
#
#   1. fill: the log filled to SIZE with 1 KiB messages over TOPICS x QUEUES
#      queues (batches of 32, window 64); the fill rate.
#   2. recover: kill -9 of every node, all three restarted; time to serving
#      (first acknowledged send, first answered pull, from the restart) and
#      each node's recovery from its "store: opened" log line (bytes of the
#      log, bytes scanned with CRCs, how long the store's open took). Done
#      twice: as kill -9 leaves the page cache, then with the page cache
#      dropped first (as after a power loss; COLD=0 skips it, and it is
#      skipped unless /proc/sys/vm/drop_caches is writable). Recovery
#      scans only the last segment (sealed ones load their index sidecar),
#      so a follower is then stopped and `raftmq store inspect` times a
#      scan of its whole log (cold, as above).
#   3. wipe: producers alone for DURATION (the baseline), then one follower
#      loses its data and is replaced as an operator replaces a node whose
#      disk was lost (a raft member must never lose its log, so it cannot
#      simply be restarted empty: the leader would tell it of a commit
#      index beyond its log): `admin node remove`, kill -9, its data
#      directory deleted, `admin node add` with the same id and addresses,
#      started with --join; the leader sends it the whole log. Its catch-up
#      rate until its applied index reaches the leader's commit index, and
#      the rate of producers sending through the leader meanwhile.
#   4. consume: producers alone for DURATION (the baseline), then one
#      puller per queue reads every queue from its first offset (the whole
#      backlog, far behind the tail) while producers go on sending to the
#      same queues until the pullers are done.
#
#   ./scripts/backlog.sh                      # 10 GB (about 15 min, 30 GB of disk while it runs)
#   SIZE=1G ./scripts/backlog.sh              # a quick look
#   SIZE=512M PHASES="fill recover" ./scripts/backlog.sh
#
# Settings (environment):
#   SIZE       commit-log bytes to fill to (default 10G; K, M, G suffixes, powers of 1024)
#   TOPICS, QUEUES  the layout (default 128 topics x 8 queues: 1,024 queues)
#   STEM       topic name stem (default backlog: backlog-0 ... backlog-127)
#   DURATION   each producers-alone baseline (default 20s)
#   CHUNK      length of each producer run while catching up or consuming
#              (default 5s): producers run in chunks until the other side ends
#   PHASES     what to run, in order (default "fill recover wipe consume";
#              every phase but fill needs the fill before it)
#   COLD       1 (default): also measure recovery with the page cache dropped
#   BASE_PORT  first client port (default 14911; clients +0..2, raft +10..12, HTTP +20..22)
#   LOCK       lock file each phase holds while it measures (default
#              /tmp/raftmq-bench.lock, as every measurement on a shared machine;
#              empty: no lock); released between phases
#   BIN        the raftmq binary (default: built from this tree into the scratch directory)
#   DATA       scratch directory (default: a new one under TMPDIR); deleted at the end unless KEEP=1
#
# Every process the script starts is stopped when it exits (Ctrl-C too).
# Each phase also prints the share of the machine's CPU that other processes
# used meanwhile: above a few percent its figures are contaminated.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

SIZE=${SIZE:-10G}
TOPICS=${TOPICS:-128}
QUEUES=${QUEUES:-8}
STEM=${STEM:-backlog}
DURATION=${DURATION:-20s}
CHUNK=${CHUNK:-5s}
PHASES=${PHASES:-fill recover wipe consume}
COLD=${COLD:-1}
BASE_PORT=${BASE_PORT:-14911}
LOCK=${LOCK-/tmp/raftmq-bench.lock}
KEEP=${KEEP:-0}

bytes_of() {
  awk -v s="$1" 'BEGIN {
    m = 1; u = toupper(substr(s, length(s)))
    if (u == "K") m = 1024; else if (u == "M") m = 1024 ^ 2; else if (u == "G") m = 1024 ^ 3
    if (m > 1) s = substr(s, 1, length(s) - 1)
    printf "%.0f", s * m
  }'
}
size=$(bytes_of "$SIZE")
[ "$size" -gt 0 ] || { echo "backlog: bad SIZE $SIZE" >&2; exit 2; }

data=${DATA:-$(mktemp -d "${TMPDIR:-/tmp}/raftmq-backlog.XXXXXX")}
mkdir -p "$data"
pids=("" "" "" "")
helpers=()

peers="1=127.0.0.1:$BASE_PORT/127.0.0.1:$((BASE_PORT + 10))"
peers="$peers,2=127.0.0.1:$((BASE_PORT + 1))/127.0.0.1:$((BASE_PORT + 11))"
peers="$peers,3=127.0.0.1:$((BASE_PORT + 2))/127.0.0.1:$((BASE_PORT + 12))"
addrs="127.0.0.1:$BASE_PORT,127.0.0.1:$((BASE_PORT + 1)),127.0.0.1:$((BASE_PORT + 2))"
http() { echo "127.0.0.1:$((BASE_PORT + 19 + $1))"; }

cleanup() {
  local i p
  set +e
  for p in "${helpers[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null; done
  for i in 1 2 3; do [ -n "${pids[$i]}" ] && kill -TERM "${pids[$i]}" 2>/dev/null; done
  for i in 1 2 3; do
    p=${pids[$i]}
    [ -n "$p" ] || continue
    for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null
    wait "$p" 2>/dev/null
  done
  if [ "$KEEP" = 1 ]; then echo "== data kept in $data"; else rm -rf "$data"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The lock, on fd 9, which no child inherits (brokers and benches get 9>&-).
if [ -n "$LOCK" ]; then exec 9>>"$LOCK"; fi
lock() {
  [ -n "$LOCK" ] || return 0
  echo "   (waiting for $LOCK)"
  flock 9
}
unlock() { [ -n "$LOCK" ] && flock -u 9 || true; }

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
stamp() { date -u +%H:%M:%S; }

hz=$(getconf CLK_TCK)
ncpu=$(nproc)
busy_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat; }
# tree_ticks: CPU ticks of this script's process tree (brokers and benches
# included, the finished ones through their parents' counts).
tree_ticks() {
  local p t=0 all
  all=$(pgrep -g "$(ps -o pgid= $$ | tr -d ' ')" 2>/dev/null || true)
  for p in $all; do
    [ -r "/proc/$p/stat" ] || continue
    t=$((t + $(sed 's/^.*) //' "/proc/$p/stat" 2>/dev/null | awk '{ print $12 + $13 + $14 + $15 }' || echo 0)))
  done
  echo "$t"
}
phase_begin() { P_T=$(now) P_B=$(busy_ticks) P_O=$(tree_ticks); }
phase_end() {
  local others
  others=$(awk -v t="$P_T" -v T="$(now)" -v b="$P_B" -v B="$(busy_ticks)" -v o="$P_O" -v O="$(tree_ticks)" -v hz="$hz" -v n="$ncpu" \
    'BEGIN { f = ((B - b) - (O - o)) / hz; if (f < 0) f = 0; printf "%.0f%%", 100 * f / ((T - t) * n) }')
  echo "   other processes used about $others of the machine's CPU during this phase"
}

# start_node runs node $1 with the command line a real deployment would
# use, appending its output to its broker.log.
start_node() {
  local i=$1 d=$data/n$1
  shift
  mkdir -p "$d"
  GOMAXPROCS=$(((ncpu + 2) / 3)) "$BIN" broker --id "$i" --data "$d" --http "$(http "$i")" --peers "$peers" $cluster_id "$@" \
    >>"$d/broker.log" 2>&1 9>&- &
  pids[$i]=$!
}
kill9_node() {
  local i=$1
  [ -n "${pids[$i]}" ] || return 0
  kill -KILL "${pids[$i]}" 2>/dev/null || true
  wait "${pids[$i]}" 2>/dev/null || true
  pids[$i]=""
}

# status_field prints field $2 of node $1's /status ("" when it does not answer).
status() { curl -s --max-time 1 "http://$(http "$1")/status" 2>/dev/null || true; }
jfield() { { grep -oE "\"$1\":[^,}]*" || true; } | head -1 | cut -d: -f2 | tr -d '"'; }
leader_id() {
  local i l s
  for i in 1 2 3; do
    l=$(status "$i" | jfield leader)
    [ -n "$l" ] && [ "$l" != 0 ] || continue
    s=$(status "$l")
    if [[ $s == *'"role":"StateLeader"'* ]]; then
      echo "$l"
      return 0
    fi
  done
  return 1
}
wait_leader() {
  for _ in $(seq 1 200); do
    if l=$(leader_id) && [[ $(status "$l") == *'"leaderReady":true'* ]]; then echo "$l"; return 0; fi
    sleep 0.1
  done
  echo "backlog: no leader within 20 s" >&2
  return 1
}
# wait_all_applied waits until every node has applied the leader's commit index.
wait_all_applied() {
  local l c i a ok
  for _ in $(seq 1 600); do
    l=$(leader_id) || { sleep 0.2; continue; }
    c=$(status "$l" | jfield commit)
    ok=1
    for i in 1 2 3; do
      a=$(status "$i" | jfield applied)
      [ -n "$a" ] && [ -n "$c" ] && [ "$a" -ge "$c" ] || ok=0
    done
    [ "$ok" = 1 ] && return 0
    sleep 0.2
  done
  echo "backlog: the nodes did not all apply the leader's commit index within 120 s" >&2
  return 1
}
log_bytes() { status "$1" | jfield logBytes; }

# bench_line runs one bench (raftmq bench ARGS) and prints its result as
# one JSON line (empty when it failed: bench.err says why).
bench_line() { { "$BIN" bench "$@" --json --addr "$addrs" 2>>"$data/bench.err" 9>&- || true; } | tail -1; }
jnum() { { echo "$1" | grep -oE "\"$2\":[0-9.eE+-]+" || true; } | head -1 | cut -d: -f2; }
msgs_of() { jnum "$1" messages; }
secs_of() { jnum "$1" seconds; }
# summary prints a bench's JSON result for people.
summary() {
  [ -n "$1" ] || { echo "failed: $(tail -1 "$data/bench.err")"; return 0; }
  awk -v m="$(jnum "$1" messages)" -v s="$(jnum "$1" seconds)" -v r="$(jnum "$1" msgsPerSec)" -v mb="$(jnum "$1" mbPerSec)" \
    -v p50="$(jnum "$1" p50ms)" -v p99="$(jnum "$1" p99ms)" -v e="$(jnum "$1" errors)" 'BEGIN {
      printf "%d messages in %.2fs: %.0f msgs/s, %.1f MB/s", m, s, r, mb
      if (p50 != "") printf "; latency p50 %.1f ms, p99 %.1f ms", p50, p99
      if (e > 0) printf "; %d errors", e
    }'
}
produce_args=(produce --topic "$STEM" --topics "$TOPICS" --queues "$QUEUES" --window 1000 --size 1024)

# produce_while runs producers in CHUNK-long runs while process $1 lives
# (at least one run) and prints "MSGS SECONDS" in total.
produce_while() {
  local watched=$1 out m s tm=0 ts=0
  while :; do
    out=$(bench_line "${produce_args[@]}" --duration "$CHUNK")
    m=$(msgs_of "$out") s=$(secs_of "$out")
    [ -n "$m" ] && tm=$((tm + m)) && ts=$(awk -v a="$ts" -v b="$s" 'BEGIN { print a + b }')
    kill -0 "$watched" 2>/dev/null || break
  done
  echo "$tm $(awk -v s="$ts" 'BEGIN { printf "%.2f", s }')"
}
rate() { awk -v m="$1" -v s="$2" 'BEGIN { if (s > 0) printf "%.0f", m / s; else print "?" }'; }
mb() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1e6 }'; }

# admin_retry runs raftmq admin ARGS until it succeeds (30 tries).
admin_retry() {
  local k
  for k in $(seq 1 30); do
    "$BIN" admin "$@" --addr "$addrs" >>"$data/admin.out" 2>&1 9>&- && return 0
    sleep 1
  done
  echo "backlog: raftmq admin $* failed:" >&2
  tail -3 "$data/admin.out" >&2
  return 1
}

# ---- phases

fill() {
  echo "== fill: $SIZE ($size bytes) of 1 KiB messages over $TOPICS x $QUEUES queues (batches of 32, window 64)  [$(stamp)]"
  local l b0 t0 b chunk per out n
  l=$(wait_leader)
  b0=$(log_bytes "$l") t0=$(now)
  chunk=$((size / 1100 / 20 + 1))
  while :; do
    b=$(log_bytes "$l")
    [ "$b" -ge "$size" ] && break
    if [ "$b" -gt "$b0" ] && [ -n "${per:-}" ]; then
      n=$(((size - b) / per + 1))
      [ "$n" -lt "$chunk" ] && chunk=$n
    fi
    out=$(bench_line produce --topic "$STEM" --topics "$TOPICS" --queues "$QUEUES" --batch 32 --window 64 \
      --size 1024 --messages "$chunk" --duration 60m)
    n=$(msgs_of "$out")
    [ -n "$n" ] && [ "$n" -gt 0 ] || { echo "   fill failed: $(summary "$out")"; tail -3 "$data/bench.err"; return 1; }
    b=$(log_bytes "$l")
    filled=$((filled + n))
    per=$(((b - b0) / filled))
    echo "   $(stamp) log $(mb "$b") MB of $(mb "$size") ($(awk -v b="$b" -v s="$size" 'BEGIN { printf "%.0f", 100 * b / s }')%); last run $(summary "$out")"
  done
  local el
  el=$(since "$t0")
  b=$(log_bytes "$l")
  echo "   filled: $(mb $((b - b0))) MB, $filled messages in ${el}s: $(awk -v b="$((b - b0))" -v s="$el" 'BEGIN { printf "%.1f", b / s / 1e6 }') MB/s of log," \
    "$(rate "$filled" "$el") msgs/s (leader's log $(mb "$b") MB, $(status "$l" | jfield lastIndex) entries)"
  wait_all_applied
  for i in 1 2 3; do echo "   n$i: log $(mb "$(log_bytes "$i")") MB, $(du -sm "$data/n$i" | cut -f1) MiB on disk"; done
}
filled=0

# probe_loop runs command "$@" until it succeeds and writes the seconds
# since $1 to file $2.
probe_loop() {
  local t0=$1 out=$2
  shift 2
  until timeout 3 "$@" >/dev/null 2>&1 9>&-; do sleep 0.02; done
  since "$t0" >"$out"
}

recover_once() {
  local kind=$1 i t0 p1 p2 l line
  echo "-- kill -9 of every node ($kind)  [$(stamp)]"
  for i in 1 2 3; do kill9_node "$i"; done
  if [ "$kind" = cold ]; then
    sync
    echo 3 >/proc/sys/vm/drop_caches
    echo "   page cache dropped"
  fi
  for i in 1 2 3; do echo "== restart $(date -u +%FT%TZ)" >>"$data/n$i/broker.log"; done
  rm -f "$data/send.t" "$data/pull.t"
  t0=$(now)
  for i in 1 2 3; do start_node "$i"; done
  probe_loop "$t0" "$data/send.t" "$BIN" produce --addr "$addrs" --topic "$STEM-0" probe &
  p1=$!
  probe_loop "$t0" "$data/pull.t" "$BIN" admin message get --addr "$addrs" -t "$STEM-1" -i 0 -o 0 &
  p2=$!
  helpers=("$p1" "$p2")
  wait "$p1" "$p2"
  helpers=()
  l=$(wait_leader)
  echo "   serving after the restart of all three: first acknowledged send $(cat "$data/send.t")s, first answered pull $(cat "$data/pull.t")s (leader n$l)"
  for i in 1 2 3; do
    sed -n '/^== restart/h; /^== restart/!H; ${x;p}' "$data/n$i/broker.log" >"$data/restart.log"
    line=$({ grep -a 'msg="store: opened"' "$data/restart.log" || true; } | tail -1)
    echo "   n$i: $(echo "$line" | grep -oE '(clean_start|took|segments|log_bytes|scanned_bytes|scan_mb_per_s)=[^ ]*' | tr '\n' ' ')"
    # Where the open's time went, from the log lines' times (ms after
    # the first line): the consume queues cut back, the index recovered.
    awk '
      function ms(l) { if (match(l, /T[0-9:.]+Z/)) { split(substr(l, RSTART + 1, RLENGTH - 2), t, ":"); return (t[1] * 3600 + t[2] * 60 + t[3]) * 1000 } return -1 }
      /^time=/ && t0 == "" { t0 = ms($0) }
      /cutting consume queue back/ { n++; if (c0 == "") c0 = ms($0); c1 = ms($0) }
      /msg="index: recovered"/ { ix = ms($0); if (match($0, /indexCount=[0-9]+/)) cnt = substr($0, RSTART, RLENGTH) }
      /msg="store: opened"/ { op = ms($0); exit }
      END {
        if (t0 == "" || op == "") exit
        if (n > 0) printf "       %d queues cut back at %d-%d ms,", n, c0 - t0, c1 - t0; else printf "       no queue cut back,"
        printf " index recovered at %d ms (%s), store opened at %d ms after its first log line\n", ix - t0, cnt, op - t0
      }
    ' "$data/restart.log"
  done
  wait_all_applied
  echo "   every node applied the leader's commit index $(since "$t0")s after the restart"
}

# full_scan stops a follower and times `raftmq store inspect` on its data,
# which reads the whole log and checks every entry's CRC (and decodes its
# messages): the rate of a scan of all of it, from the disk when the page
# cache was dropped.
full_scan() {
  local l f t0 el b
  l=$(wait_leader)
  f=$((l % 3 + 1))
  kill9_node "$f"
  local how="as the page cache holds it"
  if [ "$COLD" = 1 ] && [ -w /proc/sys/vm/drop_caches ]; then
    sync
    echo 3 >/proc/sys/vm/drop_caches
    how="page cache dropped first"
  fi
  t0=$(now)
  "$BIN" store inspect "$data/n$f" --json >"$data/inspect.json" 2>>"$data/bench.err" 9>&- || echo "   store inspect failed: $(tail -1 "$data/bench.err")"
  el=$(since "$t0")
  b=$({ grep -oE '"bytes": *[0-9]+' "$data/inspect.json" || true; } | awk -F: '{ s += $2 } END { printf "%.0f", s }')
  echo "-- full scan: raftmq store inspect of n$f ($how): commit log $(mb "$b") MB in ${el}s: $(awk -v b="$b" -v s="$el" 'BEGIN { printf "%.0f", b / s / 1e6 }') MB/s" \
    "(every entry's CRC checked and its messages decoded; also the consume queues, index and bbolt)"
  echo "== restart $(date -u +%FT%TZ)" >>"$data/n$f/broker.log"
  start_node "$f"
  wait_all_applied
}

recover() {
  echo "== recover: kill -9 of all three nodes, restart, time to serving  [$(stamp)]"
  recover_once warm
  if [ "$COLD" = 1 ]; then
    if [ -w /proc/sys/vm/drop_caches ]; then recover_once cold; else echo "   (cold recovery skipped: /proc/sys/vm/drop_caches is not writable)"; fi
  fi
  full_scan
}

wipe() {
  echo "== wipe: a follower loses its data and catches up from the leader  [$(stamp)]"
  local l f t0 out b c a el p cp res m s fb last=0
  l=$(wait_leader)
  out=$(bench_line "${produce_args[@]}" --duration "$DURATION")
  echo "   producers alone ($DURATION, window 1000, $TOPICS x $QUEUES queues): $(summary "$out")"
  base=$(rate "$(msgs_of "$out")" "$(secs_of "$out")")
  wait_all_applied
  f=$((l % 3 + 1))
  echo "   replacing follower n$f: admin node remove, kill -9, its data deleted ($(du -sm "$data/n$f" | cut -f1) MiB), admin node add, started with --join  [$(stamp)]"
  admin_retry node remove "$f"
  kill9_node "$f"
  mv "$data/n$f/broker.log" "$data/n$f.broker.log.old"
  rm -rf "$data/n$f"
  admin_retry node add "$f=127.0.0.1:$((BASE_PORT + f - 1))/127.0.0.1:$((BASE_PORT + 9 + f))"
  rm -f "$data/caught-up" "$data/wipe-produce.txt"
  t0=$(now)
  start_node "$f" --join
  # Producers through the leader while it catches up.
  (
    while [ ! -e "$data/caught-up" ]; do
      out=$(bench_line "${produce_args[@]}" --duration "$CHUNK")
      echo "$(msgs_of "$out") $(secs_of "$out")" >>"$data/wipe-produce.txt"
    done
  ) &
  p=$!
  helpers=("$p")
  while :; do
    sleep 1
    c=$(status "$l" | jfield commit)
    a=$(status "$f" | jfield applied)
    fb=$(log_bytes "$f")
    el=$(since "$t0")
    if [ -n "$a" ] && [ -n "$c" ] && [ "$a" -ge "$c" ]; then break; fi
    if ! kill -0 "${pids[$f]}" 2>/dev/null; then
      echo "   n$f exited while catching up:"; tail -5 "$data/n$f/broker.log" | sed 's/^/     /'
      touch "$data/caught-up"; wait "$p" || true; helpers=()
      return 1
    fi
    if awk -v e="$el" -v l="$last" 'BEGIN { exit !(e - l >= 5) }'; then
      last=$el
      echo "   $(stamp) n$f: applied ${a:-?} of the leader's commit ${c:-?}, log $(mb "${fb:-0}") MB ($(awk -v b="${fb:-0}" -v s="$el" 'BEGIN { printf "%.1f", b / s / 1e6 }') MB/s since its restart)"
    fi
    if awk -v e="$el" 'BEGIN { exit !(e > 1800) }'; then echo "   n$f did not catch up in 30 min"; break; fi
  done
  touch "$data/caught-up"
  wait "$p" || true
  helpers=()
  fb=$(log_bytes "$f")
  echo "   n$f caught up in ${el}s: $(mb "$fb") MB, $(awk -v b="$fb" -v s="$el" 'BEGIN { printf "%.1f", b / s / 1e6 }') MB/s (applied $a >= leader's commit $c)"
  res=$(awk '{ m += $1; s += $2 } END { printf "%d %.2f", m, s }' "$data/wipe-produce.txt")
  read -r m s <<<"$res"
  echo "   producers through leader n$l meanwhile: $m messages in ${s}s of sending: $(rate "$m" "$s") msgs/s ($(awk -v r="$(rate "$m" "$s")" -v b="$base" 'BEGIN { if (b > 0) printf "%.2f", r / b; else print "?" }') of the $base msgs/s alone)"
}

consume() {
  echo "== consume: pullers from the first offset of all $((TOPICS * QUEUES)) queues while producers run  [$(stamp)]"
  local out base c res m s
  wait_leader >/dev/null
  out=$(bench_line "${produce_args[@]}" --duration "$DURATION")
  echo "   producers alone ($DURATION, window 1000, $TOPICS x $QUEUES queues): $(summary "$out")"
  base=$(rate "$(msgs_of "$out")" "$(secs_of "$out")")
  "$BIN" bench consume --json --addr "$addrs" --topic "$STEM" --topics "$TOPICS" --queues "$QUEUES" >"$data/consume.out" 2>>"$data/bench.err" 9>&- &
  c=$!
  helpers=("$c")
  res=$(produce_while "$c")
  wait "$c" || { echo "   consume failed:"; tail -3 "$data/bench.err"; }
  helpers=()
  read -r m s <<<"$res"
  echo "   pullers (from offset 0, 32 per pull, one per queue): $(summary "$(tail -1 "$data/consume.out")")"
  echo "   producers meanwhile: $m messages in ${s}s of sending: $(rate "$m" "$s") msgs/s ($(awk -v r="$(rate "$m" "$s")" -v b="$base" 'BEGIN { if (b > 0) printf "%.2f", r / b; else print "?" }') of the $base msgs/s alone)"
}

# ---- main

if [ -z "${BIN:-}" ]; then
  echo "== build"
  go build -o "$data/raftmq" ./cmd/raftmq
  BIN=$data/raftmq
fi
# The group's --cluster-id (a binary from before cluster IDs has no
# cluster-id command, and needs none).
cluster_id=
if cid=$("$BIN" cluster-id 2>/dev/null); then cluster_id="--cluster-id $cid"; fi
echo "== $SIZE over $TOPICS x $QUEUES queues; data in $data ($(df -h --output=avail "$data" | tail -1 | tr -d ' ') free); phases: $PHASES"
first=1
for ph in $PHASES; do
  case $ph in fill | recover | wipe | consume) ;; *) echo "backlog: unknown phase $ph" >&2; exit 2 ;; esac
  lock
  phase_begin
  if [ "$first" = 1 ]; then
    for i in 1 2 3; do start_node "$i"; done
    wait_leader >/dev/null
    sleep 3 # let the warm-up zero ahead before the first run
    first=0
  fi
  "$ph"
  phase_end
  unlock
done
echo "== done  [$(stamp)]"
