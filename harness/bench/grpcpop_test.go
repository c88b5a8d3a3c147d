package bench

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/harness/testgroup"
)

// A pop run with GRPC set: after the remoting pop, the gRPC pop through a
// follower's gRPC address (receives and acks at the leader QueryRoute
// names) acks every message of the same range once.
func TestBenchPopGRPC(t *testing.T) {
	addrs, grpcAddrs := testgroup.StartGRPC(t)
	newClient := func() (*client.Client, error) {
		return client.New(client.Options{Addrs: addrs, RequestTimeout: 2 * time.Second})
	}
	c, err := newClient()
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	r, err := Pop(ctx, c, PopConfig{Topic: "bench-grpc-pop", Messages: 400, Size: 100, Consumers: 2, Batch: 16,
		NewClient: newClient, Stall: 20 * time.Second, GRPC: grpcAddrs[1]})
	require.NoError(t, err)
	require.Equal(t, int64(400), r.Pop.Messages)
	require.NotNil(t, r.GRPCPop)
	require.Zero(t, r.GRPCPop.Errors, r.GRPCPop.FirstErr)
	require.Equal(t, int64(400), r.GRPCPop.Messages)
	require.Zero(t, r.GRPCPop.Duplicates)
	require.Zero(t, r.GRPCAckFailures)
	require.Positive(t, r.GRPCAcks)
	require.Positive(t, r.GRPCAckP50)
	require.Contains(t, r.GRPCPop.Mode, "grpc pop")
	require.Contains(t, r.String(), "grpc pop")
	t.Logf("%s", r)

	_, err = Pop(ctx, c, PopConfig{Topic: "bench-grpc-pop", NewClient: newClient, GRPC: "127.0.0.1:1"})
	require.Error(t, err, "no gRPC service there")
}
