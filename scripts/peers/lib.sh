# lib.sh: helpers of the peer runners (scripts/peers/*/run.sh), sourced.
#
# A benchmark on a small shared machine measures whatever else runs, so
# every run is bracketed by CPU accounting: what the servers (the PIDS
# array) used, what the bench client used, and what everything else on
# the machine used. A run where the rest used more than a tenth of the
# run's time is marked CONTAMINATED and, RETRIES times (2), run again
# after waiting for a quiet machine.

# wait_quiet waits until the 1-minute load average is below QUIET_LOAD
# (0.6), for at most QUIET_WAIT seconds (900; 0 does not wait), and says
# what it found.
wait_quiet() {
  local limit=${QUIET_WAIT:-900} below=${QUIET_LOAD:-0.6} waited=0 load
  while :; do
    load=$(cut -d' ' -f1 /proc/loadavg)
    if awk -v l="$load" -v b="$below" 'BEGIN { exit !(l < b) }'; then
      echo "== quiet machine (load $load)"
      return 0
    fi
    if [ "$waited" -ge "$limit" ]; then
      echo "!! load $load after ${waited}s of waiting; the busiest processes:"
      ps -eo pid,pcpu,rss,comm --sort=-pcpu | sed -n 2,6p
      return 0
    fi
    [ $((waited % 60)) -eq 0 ] && echo "== waiting for a quiet machine (load $load)"
    sleep 10
    waited=$((waited + 10))
  done
}

# proc_ticks PID... prints the user+system clock ticks the processes used.
proc_ticks() {
  local sum=0 pid t
  for pid in "$@"; do
    [ -r "/proc/$pid/stat" ] || continue
    # The fields after the command's closing parenthesis: utime is the
    # 12th, stime the 13th.
    t=$(sed 's/^.*) //' "/proc/$pid/stat" | awk '{ print $12 + $13 }')
    sum=$((sum + t))
  done
  echo "$sum"
}

# machine_ticks prints the machine's busy clock ticks (all but idle and
# iowait).
machine_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat; }

# measured FILE CMD... runs a bench command whose output has a line
# "RESULT {json}" with client_cpu_s and seconds. It appends to that JSON
# srv_cpu_s (the servers' CPU seconds), foreign_cpu_s (everything else's)
# and load1_before, adds the same figures to the other lines, and appends
# the output to FILE. A command that fails is reported on a line starting
# with "!!", with the end of its error output, and measured fails.
measured() {
  local file=$1 hz try=0 load s0 s1 m0 m1 srv busy client secs foreign flag line
  shift
  hz=$(getconf CLK_TCK)
  while :; do
    load=$(cut -d' ' -f1 /proc/loadavg)
    s0=$(proc_ticks "${PIDS[@]}")
    m0=$(machine_ticks)
    if ! "$@" >"$file.run" 2>"$file.err"; then
      echo "!! ${1##*/} failed: $(tail -3 "$file.err" | tr '\n' ' ')"
      rm -f "$file.run" "$file.err"
      return 1
    fi
    cat "$file.err" >&2
    s1=$(proc_ticks "${PIDS[@]}")
    m1=$(machine_ticks)
    srv=$(awk -v a="$s0" -v b="$s1" -v hz="$hz" 'BEGIN { printf "%.2f", (b - a) / hz }')
    busy=$(awk -v a="$m0" -v b="$m1" -v hz="$hz" 'BEGIN { printf "%.2f", (b - a) / hz }')
    client=$(grep -o '"client_cpu_s":[0-9.e+-]*' "$file.run" | head -1 | cut -d: -f2)
    secs=$(grep -o '"seconds":[0-9.e+-]*' "$file.run" | head -1 | cut -d: -f2)
    foreign=$(awk -v b="$busy" -v s="$srv" -v c="${client:-0}" 'BEGIN { f = b - s - c; printf "%.2f", f < 0 ? 0 : f }')
    flag=$(awk -v f="$foreign" -v s="${secs:-1}" 'BEGIN { if (f > 0.1 * s + 0.3) print " CONTAMINATED" }')
    if [ -n "$flag" ] && [ "$try" -lt "${RETRIES:-2}" ]; then
      try=$((try + 1))
      echo "!! other processes used ${foreign}s of CPU during a ${secs}s run; retry $try after a quiet wait"
      wait_quiet
      continue
    fi
    break
  done
  while IFS= read -r line; do
    case $line in
    RESULT*) echo "${line%\}},\"srv_cpu_s\":$srv,\"foreign_cpu_s\":$foreign,\"load1_before\":$load}" ;;
    *) echo "$line  [cpu s: servers=$srv client=${client:-0} other=$foreign$flag]" ;;
    esac
  done <"$file.run" | tee -a "$file"
  rm -f "$file.run" "$file.err"
}

# wait_ports PORT... waits up to 30 s for each port of 127.0.0.1 to accept
# a connection.
wait_ports() {
  local port i
  for port in "$@"; do
    for i in $(seq 300); do
      (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
      sleep 0.1
    done
  done
}

# stop_pids stops the processes of PIDS and waits for them.
stop_pids() {
  local pid
  for pid in "${PIDS[@]:-}"; do [ -n "$pid" ] && kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]:-}"; do [ -n "$pid" ] && wait "$pid" 2>/dev/null || true; done
}
