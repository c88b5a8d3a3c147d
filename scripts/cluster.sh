#!/usr/bin/env bash
# The README's first command: build raftmq and start a local group.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
go build -o ./raftmq ./cmd/raftmq
exec ./raftmq cluster "$@"
