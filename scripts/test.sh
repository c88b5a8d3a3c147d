#!/usr/bin/env bash
# The project's test command (README: "Run the tests"). Unit, crash and
# integration tests on real files; a few minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
go test -count=1 -timeout 15m ./... "$@"
# The packages whose tests check the mutant build itself (the name table,
# a campaign per mutant): a few seconds.
go test -count=1 -timeout 5m -tags mutant ./internal/mutant ./jepsen "$@"
# The broker's fault endpoint (tick-rate and clock skew), compiled only
# into the mutant build.
go test -count=1 -timeout 5m -tags mutant -run 'TestFault' ./cluster "$@"
