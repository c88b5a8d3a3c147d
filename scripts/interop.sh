#!/usr/bin/env bash
# Runs the interop suite: raftmq against Apache RocketMQ's own Go client
# (interop/, a module of its own). Extra arguments go to `go test`, e.g.
#   ./scripts/interop.sh -short          # one leader kill instead of three
#   ./scripts/interop.sh -run Broadcast  # one test
set -euo pipefail
cd "$(dirname "$0")/../interop"
export PATH="/usr/local/go/bin:$PATH"
# The RocketMQ client writes broadcasting offsets under
# rocketmq.client.localOffsetStoreDir (default ~/.rocketmq_client_go):
# keep them in a scratch directory.
offsets=$(mktemp -d)
trap 'rm -rf "$offsets"' EXIT
env "rocketmq.client.localOffsetStoreDir=$offsets" go test -count=1 -timeout 15m "$@" ./...
