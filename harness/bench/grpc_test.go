package bench

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/harness/testgroup"
	"github.com/raftmq/raftmq/protocol/grpc/rmqpb"
)

// A gRPC produce run through a follower's gRPC address: the sends go to
// the leader QueryRoute names, every message counted is stored once, in
// single sends and in batches.
func TestBenchProduceGRPC(t *testing.T) {
	addrs, grpcAddrs := testgroup.StartGRPC(t)
	c, err := client.New(client.Options{Addrs: addrs, RequestTimeout: 2 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	stored := func(topic string) int64 {
		var n int64
		for q := range int32(4) {
			off, err := c.MaxOffset(ctx, topic, q)
			require.NoError(t, err)
			n += off
		}
		return n
	}
	r, err := Produce(ctx, c, ProduceConfig{Topic: "bench-grpc", Size: 100, Window: 4, Producers: 2, Duration: 20 * time.Second,
		Messages: 300, GRPC: grpcAddrs[2]})
	require.NoError(t, err)
	require.Zero(t, r.Errors, r.FirstErr)
	require.Equal(t, int64(300), r.Messages)
	require.Equal(t, int64(300), stored("bench-grpc"))
	require.Contains(t, r.Mode, "grpc")
	require.Positive(t, r.P50)
	t.Logf("%s", r)

	r, err = Produce(ctx, c, ProduceConfig{Topic: "bench-grpc-b", Size: 100, Window: 2, Batch: 8, Duration: 20 * time.Second,
		Messages: 100, GRPC: grpcAddrs[1]})
	require.NoError(t, err)
	require.Equal(t, int64(100), r.Messages)
	require.Equal(t, int64(100), stored("bench-grpc-b"))

	// grpc-go's client, still selectable; a connection per producer.
	r, err = Produce(ctx, c, ProduceConfig{Topic: "bench-grpc-g", Size: 100, Window: 4, Producers: 2, Duration: 20 * time.Second,
		Messages: 200, GRPC: grpcAddrs[0], GRPCClient: GRPCGo, GRPCConns: 2})
	require.NoError(t, err)
	require.Zero(t, r.Errors, r.FirstErr)
	require.Equal(t, int64(200), stored("bench-grpc-g"))
	require.Contains(t, r.Mode, "grpc (grpc-go)")

	_, err = Produce(ctx, c, ProduceConfig{Topic: "bench-grpc-x", Duration: time.Second, GRPC: "127.0.0.1:1"})
	require.Error(t, err, "no gRPC service there")
}

// A SendMessage answer read by hand (grpcSendAnswer, the lean client's)
// fails or passes as the generated response does in grpcSendErr, with
// the same error; bytes that do not decode are an error.
func TestGRPCSendAnswer(t *testing.T) {
	ok := &rmqpb.Status{Code: rmqpb.Code_OK, Message: "OK"}
	for _, resp := range []*rmqpb.SendMessageResponse{
		{Status: ok, Entries: []*rmqpb.SendResultEntry{{Status: ok, MessageId: "m", Offset: 7}}},
		{Status: ok, Entries: []*rmqpb.SendResultEntry{{Status: ok}, {Status: &rmqpb.Status{Code: rmqpb.Code_TOPIC_NOT_FOUND, Message: "no topic"}}}},
		{Status: &rmqpb.Status{Code: rmqpb.Code_UNAUTHORIZED, Message: "who"}},
		{Status: ok},
		{},
	} {
		b, err := proto.Marshal(resp)
		require.NoError(t, err)
		var a grpcSendAnswer
		require.NoError(t, a.UnmarshalProto(b))
		want := grpcSendErr(resp)
		if want == nil {
			require.NoError(t, a.err(), "%v", resp)
		} else {
			require.EqualError(t, a.err(), want.Error(), "%v", resp)
		}
	}
	var a grpcSendAnswer
	require.Error(t, a.UnmarshalProto([]byte{0x0a, 0x05, 0x08}), "a status cut short")
}
