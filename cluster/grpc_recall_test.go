package cluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/raftmq/raftmq/protocol/grpc/rmqpb"
	"github.com/raftmq/raftmq/protocol/remoting"
	"github.com/raftmq/raftmq/store/schedule"
)

// RecallMessage through a follower: a timer message recalled before it is
// due is never delivered, on any node, across a change of leader (the
// stopped leader, restarted, holds the recall too); a recall after
// delivery is NOT_FOUND; a garbled handle, another topic's, and one forged
// for a normal message are BAD_REQUEST.
func TestGRPCRecall(t *testing.T) {
	tb := startGRPCBrokers(t, nil)
	f := tb.follower()
	c := grpcClient(t, f.GRPCAddr())
	ctx := clientCtx(t, "host@6@0@test", nil)
	send := func(id string, due time.Time) *rmqpb.SendResultEntry {
		m := grpcMsg("RT", id, id, func(sp *rmqpb.SystemProperties) {
			if !due.IsZero() {
				sp.MessageType, sp.DeliveryTimestamp = rmqpb.MessageType_DELAY, timestamppb.New(due)
			}
		})
		resp, err := c.SendMessage(ctx, &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{m}})
		require.NoError(t, err)
		require.Equal(t, rmqpb.Code_OK, resp.Status.Code, resp.Status.Message)
		return resp.Entries[0]
	}
	recall := func(topic, handle string) *rmqpb.RecallMessageResponse {
		resp, err := c.RecallMessage(ctx, &rmqpb.RecallMessageRequest{Topic: &rmqpb.Resource{Name: topic}, RecallHandle: handle})
		require.NoError(t, err)
		return resp
	}
	normal := send("N", time.Time{})
	require.Empty(t, normal.RecallHandle, "a normal message has no recall handle")
	start := time.Now()
	early := send("RC2", start.Add(time.Second))
	rc1 := send("RC1", start.Add(4*time.Second))
	send("SENTINEL", start.Add(4500*time.Millisecond))
	require.NotEmpty(t, rc1.RecallHandle)

	r := recall("RT", rc1.RecallHandle)
	require.Equal(t, rmqpb.Code_OK, r.Status.Code, r.Status.Message)
	require.Equal(t, "RC1", r.MessageId)
	r = recall("RT", rc1.RecallHandle)
	require.Equal(t, rmqpb.Code_OK, r.Status.Code, "a second recall: %s", r.Status.Message)

	r = recall("RT", "garbled")
	require.Equal(t, rmqpb.Code_BAD_REQUEST, r.Status.Code, r.Status.Message)
	send("OTHER", start.Add(time.Hour))
	r = recall("OTHER-TOPIC", rc1.RecallHandle)
	require.NotEqual(t, rmqpb.Code_OK, r.Status.Code, r.Status.Message)
	l := tb.leader()
	nm, err := l.Replica().Store().QueryByUniqKey("RT", "N")
	require.NoError(t, err)
	forged := schedule.Handle{Topic: "RT", BrokerName: l.cfg.BrokerName, Due: start.Add(time.Hour).UnixMilli(), MsgID: "N", Phy: nm.PhysicalOffset}.Encode()
	r = recall("RT", forged)
	require.Equal(t, rmqpb.Code_BAD_REQUEST, r.Status.Code, "a normal message's forged handle: %s", r.Status.Message)

	// The leader stops; another takes over; it comes back.
	old := l.cfg.ID
	require.NoError(t, l.Close())
	delete(tb.bs, old)
	require.NotEqual(t, old, tb.leader().cfg.ID)
	tb.start(old)

	delivered := func(b *Broker, id string) bool {
		_, err := b.Replica().Store().QueryByUniqKey("RT", id)
		return err == nil
	}
	require.Eventually(t, func() bool {
		for _, b := range tb.bs {
			if !delivered(b, "SENTINEL") || !delivered(b, "RC2") {
				return false
			}
		}
		return true
	}, 30*time.Second, 20*time.Millisecond, "the messages due around the recalled one are delivered everywhere")
	for id, b := range tb.bs {
		require.False(t, delivered(b, "RC1"), "node %d delivered the recalled message", id)
		require.True(t, b.Replica().Store().Recalled("RT", "RC1"), "node %d holds the recall", id)
	}
	r = recall("RT", early.RecallHandle)
	require.Equal(t, rmqpb.Code_NOT_FOUND, r.Status.Code, "a recall after delivery: %s", r.Status.Message)

	// The same over remoting RECALL_MESSAGE.
	late := send("RC3", time.Now().Add(time.Hour))
	rc := dial(t, tb.follower().ClientAddr())
	req := func(handle string) *remoting.Command {
		return remoting.NewRequest(remoting.RecallMessage, map[string]string{"producerGroup": "pg", "topic": "RT", "recallHandle": handle}, nil)
	}
	resp := invoke(t, rc, req(late.RecallHandle))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	require.Equal(t, "RC3", resp.ExtFields["msgId"])
	resp = invoke(t, rc, req("garbled"))
	require.Equal(t, remoting.IllegalOperation, resp.Code, resp.Remark)
	resp = invoke(t, rc, req(early.RecallHandle))
	require.Equal(t, remoting.NoMessage, resp.Code, resp.Remark)
	require.True(t, tb.leader().Replica().Store().Recalled("RT", "RC3"))
}
