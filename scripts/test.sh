#!/usr/bin/env bash
# The project's test command (README: "Set up (two commands)"; more in
# docs/testing.md). Unit, crash and
# integration tests on real files; a few minutes on 2 cores.
#
#   scripts/test.sh [--under-load [N]] [go test flags...]
#
# --under-load runs the suite N times (default 3) while Debian's `stress`
# keeps every core busy beside it (stress --cpu $(nproc)): the tests wait
# on conditions or on an injected clock, never on a wall-clock guess, and
# this is how that is checked. It takes several times as long as a plain
# run, so CI does not run it.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

if [ "${1:-}" = "--under-load" ]; then
  shift
  runs=3
  if [[ "${1:-}" =~ ^[0-9]+$ ]]; then runs=$1; shift; fi
  if ! command -v stress >/dev/null 2>&1; then
    echo "test.sh: --under-load needs Debian's stress (apt-get install stress)" >&2
    exit 2
  fi
  stress --cpu "$(nproc)" >/dev/null 2>&1 &
  spid=$!
  trap 'kill $spid 2>/dev/null || true' EXIT
  for i in $(seq 1 "$runs"); do
    echo "== under load: run $i of $runs (stress --cpu $(nproc) beside it)"
    "$0" "$@"
  done
  echo "== under load: $runs of $runs runs passed"
  exit 0
fi

go test -count=1 -timeout 15m ./... "$@"
# The packages whose tests check the mutant build itself (the failpoints'
# name table, a campaign per mutant): a few seconds.
go test -count=1 -timeout 5m -tags mutant ./internal/failpoint ./jepsen "$@"
# The broker's fault endpoint (tick-rate and clock skew), compiled only
# into the mutant build.
go test -count=1 -timeout 5m -tags mutant -run 'TestFault' ./cluster "$@"
# Failpoints are per store: a no-dedupe store beside a correct one.
go test -count=1 -timeout 5m -tags mutant -run 'TestFailpoints' ./store "$@"
# The simulator against the product's own failpoints: the storage's
# vote-not-fsynced and the owner loop's ack-before-commit.
go test -count=1 -timeout 5m -tags mutant -run 'TestSimCatchesUnsyncedVote|TestSimCatchesAckBeforeCommit' ./raftlog "$@"
# The gRPC port's other transport (grpc-go's server, --grpc-transport
# grpc-go): the cluster's gRPC tests once more on it.
RAFTMQ_TEST_GRPC_TRANSPORT=grpc-go go test -count=1 -timeout 5m -run 'GRPC' ./cluster "$@"
