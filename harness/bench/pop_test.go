package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A pop run over an in-process group: every message sent is pulled once
// and acked once by pop, with ack latencies recorded.
func TestBenchPop(t *testing.T) {
	newClient, c, ctx := groupClient(t)
	r, err := Pop(ctx, c, PopConfig{Topic: "bench-pop", Queues: 4, Messages: 500, Size: 100, Consumers: 3, AckEach: true, AckWindow: 4,
		NewClient: newClient, Stall: 20 * time.Second})
	require.NoError(t, err)
	require.Equal(t, int64(500), r.Produce.Messages)
	require.Equal(t, int64(500), r.Pull.Messages)
	require.Equal(t, int64(500), r.Pop.Messages)
	require.Zero(t, r.Pop.Duplicates)
	require.Zero(t, r.AckFailures)
	require.GreaterOrEqual(t, r.Acks, int64(500))
	require.Positive(t, r.AckP50)
	require.GreaterOrEqual(t, r.AckP99, r.AckP50)
	require.Positive(t, r.Ratio)
	require.Equal(t, 3, r.Pop.Consumers)
	require.Equal(t, 4, r.Pop.Window)
	t.Logf("%s", r)

	// The same messages with a new group, each received batch acked in
	// one request.
	r, err = Pop(ctx, c, PopConfig{Topic: "bench-pop", Queues: 4, Consumers: 3, NewClient: newClient, Stall: 20 * time.Second})
	require.NoError(t, err)
	require.Equal(t, int64(500), r.Pop.Messages)
	require.Zero(t, r.Pop.Duplicates)
	require.Zero(t, r.AckFailures)
	require.False(t, r.AckEach)
	require.GreaterOrEqual(t, r.Acks, int64(500/32))
	require.LessOrEqual(t, r.Acks, r.Receives)
	require.Positive(t, r.AckP50)
	t.Logf("%s", r)

	_, err = Pop(ctx, c, PopConfig{Topic: "bench-pop", Batch: 33, NewClient: newClient})
	require.ErrorContains(t, err, "1 to 32")
}
