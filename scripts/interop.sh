#!/usr/bin/env bash
# Runs the interop suite: raftmq against Apache RocketMQ's own Go client
# (interop/, a Go module of its own). Extra arguments go to `go test`:
#   ./scripts/interop.sh                 # everything (three leader kills)
#   ./scripts/interop.sh -short          # one leader kill instead of three (CI)
#   INTEROP_SHORT=1 ./scripts/interop.sh # the same
#   ./scripts/interop.sh -run 'TestClient/Clustering' -v
# Diagnosis: INTEROP_KEEP_LOGS=DIR keeps every broker log under DIR;
# INTEROP_CLIENT_LOG=info prints the RocketMQ client's log;
# INTEROP_BROKER_VERBOSE=1 runs the brokers with -v.
set -euo pipefail
cd "$(dirname "$0")/../interop"
export PATH="/usr/local/go/bin:$PATH"
args=()
if [ -n "${INTEROP_SHORT:-}" ]; then
  args+=(-short)
fi
# The RocketMQ client writes broadcasting consumers' offsets under
# rocketmq.client.localOffsetStoreDir (default ~/.rocketmq_client_go):
# keep them in a scratch directory.
offsets=$(mktemp -d)
trap 'rm -rf "$offsets"' EXIT
env "rocketmq.client.localOffsetStoreDir=$offsets" go test -count=1 -timeout 15m "${args[@]}" "$@" ./...
