package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/raftmq/raftmq/protocol/grpc/rmqpb"
)

// A push consumer's receive (auto_renew, no invisible_duration) is renewed
// by the node that answered it before it becomes visible, for as long as
// the client holds it: another receive past the first invisible time does
// not get it, and the client's ack with its first handle acks it (the node
// swaps in the latest handle) and ends the renewal.
func TestGRPCAutoRenew(t *testing.T) {
	tb := startGRPCBrokers(t, nil)
	l, f := tb.leader(), tb.follower()
	r := f.grpcSvc.renew
	r.mu.Lock()
	r.invisible, r.ahead, r.steps = 3*time.Second, 2*time.Second, []time.Duration{3 * time.Second}
	r.mu.Unlock()
	c := grpcClient(t, f.GRPCAddr())
	ctx := clientCtx(t, "host@8@0@push", nil)
	other := clientCtx(t, "host@9@0@simple", nil)
	require.NoError(t, l.ensureGroup(ctx, "pg"))
	recv := func(ctx context.Context, auto bool) []*rmqpb.Message {
		req := &rmqpb.ReceiveMessageRequest{Group: &rmqpb.Resource{Name: "pg"}, MessageQueue: &rmqpb.MessageQueue{Topic: &rmqpb.Resource{Name: "P"}},
			BatchSize: 8, AutoRenew: auto, LongPollingTimeout: durationpb.New(time.Second)}
		if !auto {
			req.InvisibleDuration = durationpb.New(10 * time.Second)
		}
		st, msgs, err := receiveAll(t, c, ctx, req)
		require.NoError(t, err)
		require.Contains(t, []rmqpb.Code{rmqpb.Code_OK, rmqpb.Code_MESSAGE_NOT_FOUND}, st.Code, st.Message)
		return msgs
	}
	send := func(id string) {
		resp, err := c.SendMessage(ctx, &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{grpcMsg("P", id, "x", nil)}})
		require.NoError(t, err)
		require.Equal(t, rmqpb.Code_OK, resp.Status.Code, resp.Status.Message)
	}
	send("P0")
	recv(other, false) // the group starts at the queues' ends
	send("P1")
	var got []*rmqpb.Message
	require.Eventually(t, func() bool { got = append(got, recv(ctx, true)...); return len(got) > 0 }, 10*time.Second, time.Millisecond)
	require.Len(t, got, 1)
	received := time.Now()
	first := got[0].SystemProperties.GetReceiptHandle()

	renewed := func() int { r.mu.Lock(); defer r.mu.Unlock(); return r.renewed }
	require.Eventually(t, func() bool { return renewed() >= 2 && time.Since(received) > 4*time.Second }, 20*time.Second, 10*time.Millisecond)
	require.Empty(t, recv(other, false), "renewed past its first invisible time, the message stays hidden")

	ack, err := c.AckMessage(ctx, &rmqpb.AckMessageRequest{Group: &rmqpb.Resource{Name: "pg"}, Topic: &rmqpb.Resource{Name: "P"},
		Entries: []*rmqpb.AckMessageEntry{{MessageId: "P1", ReceiptHandle: first}}})
	require.NoError(t, err)
	require.Equal(t, rmqpb.Code_OK, ack.Status.Code, "an ack with the first handle: %s", ack.Status.Message)
	r.mu.Lock()
	require.Empty(t, r.m, "the ack ends the renewal")
	r.mu.Unlock()
}
