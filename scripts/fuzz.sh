#!/usr/bin/env bash
# Fuzzes every fuzz target in the tree (each `func Fuzz...` in a _test.go
# file), one after another, for DURATION each (default 20s; measured
# counts in docs/fuzzing.md):
#
#   scripts/fuzz.sh            # 20 s per target
#   scripts/fuzz.sh 5m         # 5 min per target
#   scripts/fuzz.sh 1m FuzzBrokerConnection   # only targets matching a regexp
#
# -fuzzminimizetime bounds the minimisation of each new interesting input
# (FUZZ_MINIMIZE, default 200x executions), so the time goes to new inputs:
# with Go's default (60 s each) a target whose inputs are slow spends its
# whole run minimising its first finds. One worker per target
# (FUZZ_PARALLEL, default 1: the machine is shared). Prints, per target,
# the inputs executed and the new interesting ones; exits non-zero if any
# target failed, after printing the end of its output (the failing input
# is in the package's testdata/fuzz/<target>/, as go test says). Each
# target's whole output is in FUZZ_LOGS (default a fresh temporary dir).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
duration=${1:-20s}
only=${2:-.}
minimize=${FUZZ_MINIMIZE:-200x}
parallel=${FUZZ_PARALLEL:-1}
logs=${FUZZ_LOGS:-$(mktemp -d -t raftmq-fuzz.XXXXXX)}
mkdir -p "$logs"

# seconds DURATION: the seconds in a Go duration made of h, m and s parts.
seconds() {
	local d=$1 total=0
	while [[ $d =~ ^([0-9]+)([hms])(.*)$ ]]; do
		case ${BASH_REMATCH[2]} in
		h) total=$((total + BASH_REMATCH[1] * 3600)) ;;
		m) total=$((total + BASH_REMATCH[1] * 60)) ;;
		s) total=$((total + BASH_REMATCH[1])) ;;
		esac
		d=${BASH_REMATCH[3]}
	done
	if [[ -n $d ]]; then
		echo "fuzz.sh: DURATION must be like 30s, 5m or 1h30m, not $1" >&2
		exit 2
	fi
	echo "$total"
}
# go test's own timeout (10 min by default) would end a long run: allow
# the fuzzing time plus 10 minutes for building and the seed corpus.
secs=$(seconds "$duration")
timeout=$((secs + 600))s

targets=$(git grep -E '^func Fuzz[A-Za-z0-9_]*\(' -- '*_test.go' |
	sed -E 's/^([^:]*):func (Fuzz[A-Za-z0-9_]*)\(.*/\1 \2/' | sort)

failed=()
total=0
printf '%-42s %-24s %10s %6s  %s\n' package target inputs new result
while read -r file name; do
	[[ -z "$name" ]] && continue
	[[ "$name" =~ $only ]] || continue
	pkg=./$(dirname "$file")
	log="$logs/$(dirname "$file" | tr / _)_$name.log"
	if go test "$pkg" -run '^$' -fuzz "^$name\$" -fuzztime "$duration" -timeout "$timeout" \
		-fuzzminimizetime "$minimize" -parallel "$parallel" >"$log" 2>&1; then
		result=ok
	else
		result=FAIL
		failed+=("$pkg $name")
	fi
	# go test prints "fuzz: elapsed: 20s, execs: 21503 (1075/sec), new
	# interesting: 3 (total: 61)" every 3 s and at the end.
	# (None when a seed already failed.)
	execs=$(grep -o 'execs: [0-9]*' "$log" | tail -n 1 | awk '{print $2}' || true)
	newi=$(grep -o 'new interesting: [0-9]*' "$log" | tail -n 1 | awk '{print $3}' || true)
	total=$((total + ${execs:-0}))
	printf '%-42s %-24s %10s %6s  %s\n' "$pkg" "$name" "${execs:-?}" "${newi:-?}" "$result"
	if [[ $result == FAIL ]]; then
		tail -n 40 "$log" | sed 's/^/    /'
	fi
done <<<"$targets"
echo "inputs executed in all: $total ($duration per target); outputs in $logs"
if ((${#failed[@]} > 0)); then
	printf 'FAILED: %s\n' "${failed[@]}"
	exit 1
fi
