package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/offsets"
	"github.com/raftmq/raftmq/protocol/remoting"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/store/pop"
)

// popSetup creates topic T (queues queues) and group g (mod changes its
// config) through c, and sends n messages to queue 0.
func popSetup(t *testing.T, c *remoting.Conn, queues int32, n int, mod func(*offsets.SubscriptionGroupConfig)) {
	t.Helper()
	ch := remoting.CreateTopicRequestHeader{Topic: "T", ReadQueueNums: queues, WriteQueueNums: queues, Perm: 6}
	require.Equal(t, remoting.Success, invoke(t, c, remoting.NewRequest(remoting.UpdateAndCreateTopic, ch.Encode(), nil)).Code)
	gc := offsets.NewSubscriptionGroupConfig("g")
	if mod != nil {
		mod(&gc)
	}
	body, err := json.Marshal(gc)
	require.NoError(t, err)
	resp := invoke(t, c, remoting.NewRequest(remoting.UpdateAndCreateSubscriptionGroup, nil, body))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	for i := range n {
		resp := invoke(t, c, sendCmd("T", 0, fmt.Sprint("m", i), fmt.Sprint("U", i)))
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	}
}

type popped struct {
	body, ck string
	offset   int64
	attempts int32
}

// popReq pops up to max messages of g from T (queue -1: any).
func popReq(t *testing.T, c *remoting.Conn, queue, maxMsgs int32, invisible, poll time.Duration, mod func(*remoting.PopMessageRequestHeader)) (*remoting.Command, []popped) {
	t.Helper()
	h := remoting.PopMessageRequestHeader{ConsumerGroup: "g", Topic: "T", QueueID: queue, MaxMsgNums: maxMsgs,
		InvisibleTime: invisible.Milliseconds(), PollTime: poll.Milliseconds(), BornTime: time.Now().UnixMilli(), InitMode: remoting.PopInitMin}
	if mod != nil {
		mod(&h)
	}
	resp := invoke(t, c, remoting.NewRequest(remoting.PopMessage, h.Encode(), nil))
	var out []popped
	for b := resp.Body; len(b) > 0; {
		m, n, err := message.Decode(b)
		require.NoError(t, err)
		b = b[n:]
		out = append(out, popped{body: string(m.Body), ck: m.Properties[message.PropertyPopCK], offset: m.QueueOffset, attempts: m.ReconsumeTimes})
	}
	return resp, out
}

func ackReq(t *testing.T, c *remoting.Conn, p popped) *remoting.Command {
	t.Helper()
	h := remoting.AckMessageRequestHeader{ConsumerGroup: "g", Topic: "T", QueueID: 0, ExtraInfo: p.ck, Offset: p.offset}
	return invoke(t, c, remoting.NewRequest(remoting.AckMessage, h.Encode(), nil))
}

// Pop through a follower, ack through the other follower, an expired
// message comes back with a new receipt, acks are idempotent, a stale or
// forged receipt changes nothing, and bad requests get RocketMQ's codes.
func TestPopAckRedeliver(t *testing.T) {
	tb := startBrokers(t)
	l, f := tb.leader(), tb.follower()
	var other *Broker
	for _, b := range tb.bs {
		if b != l && b != f {
			other = b
		}
	}
	cl, cf, co := dial(t, l.ClientAddr()), dial(t, f.ClientAddr()), dial(t, other.ClientAddr())
	popSetup(t, cl, 1, 5, nil)

	resp, msgs := popReq(t, cf, -1, 3, 400*time.Millisecond, 0, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	require.Len(t, msgs, 3)
	rh, err := remoting.DecodePopMessageResponseHeader(resp.ExtFields)
	require.NoError(t, err)
	require.Equal(t, "0 0 0,1,2", rh.MsgOffsetInfo)
	require.Equal(t, l.ClientAddr(), resp.ExtFields[remoting.FieldLeader], "a pop a follower forwarded names the leader")
	for i, m := range msgs {
		require.Equal(t, fmt.Sprint("m", i), m.body)
		require.Zero(t, m.attempts)
		e, err := remoting.ParseExtraInfo(m.ck)
		require.NoError(t, err)
		require.Equal(t, int64(i), e.QueueOffset)
		require.Equal(t, rh.PopTime, e.PopTime)
	}
	// Acks through another node; again (idempotent).
	require.Equal(t, remoting.Success, ackReq(t, co, msgs[0]).Code)
	require.Equal(t, remoting.Success, ackReq(t, co, msgs[0]).Code)
	// Change 1's invisible time: the old receipt dies, the new one lives.
	chh := remoting.ChangeInvisibleTimeRequestHeader{ConsumerGroup: "g", Topic: "T", QueueID: 0, ExtraInfo: msgs[1].ck, Offset: 1, InvisibleTime: 60_000}
	cresp := invoke(t, cf, remoting.NewRequest(remoting.ChangeMessageInvisibleTime, chh.Encode(), nil))
	require.Equal(t, remoting.Success, cresp.Code, cresp.Remark)
	crh, err := remoting.DecodeChangeInvisibleTimeResponseHeader(cresp.ExtFields)
	require.NoError(t, err)
	require.Greater(t, crh.PopTime, rh.PopTime)
	require.Equal(t, remoting.NoMessage, ackReq(t, cl, msgs[1]).Code, "the receipt replaced by a change")
	// The two others are popped next; then nothing.
	_, next := popReq(t, cl, 0, 32, 30*time.Second, 0, nil)
	require.Len(t, next, 2)
	require.Equal(t, []int64{3, 4}, []int64{next[0].offset, next[1].offset})
	resp, none := popReq(t, cf, 0, 32, 30*time.Second, 0, nil)
	require.Equal(t, remoting.PollingTimeout, resp.Code)
	require.Empty(t, none)
	// 2's invisible time passes: it comes back with attempt 2 and a new
	// receipt; the old receipt no longer acks it.
	var again []popped
	require.Eventually(t, func() bool {
		_, again = popReq(t, cf, 0, 32, 30*time.Second, 0, nil)
		return len(again) > 0
	}, 10*time.Second, 50*time.Millisecond)
	require.Len(t, again, 1)
	require.Equal(t, int64(2), again[0].offset)
	require.Equal(t, int32(1), again[0].attempts)
	require.NotEqual(t, msgs[2].ck, again[0].ck)
	require.Equal(t, remoting.NoMessage, ackReq(t, cl, msgs[2]).Code, "an expired receipt")
	ack := ackReq(t, cl, again[0])
	require.Equal(t, remoting.Success, ack.Code)
	require.Empty(t, ack.ExtFields[remoting.FieldLeader], "the leader's own answer names no leader")
	// Long polling: a pop waits for a message sent meanwhile.
	go func() {
		time.Sleep(300 * time.Millisecond)
		invoke(t, cl, sendCmd("T", 0, "late", "ULATE"))
	}()
	start := time.Now()
	resp, late := popReq(t, cf, 0, 32, 30*time.Second, 5*time.Second, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	require.Len(t, late, 1)
	require.Equal(t, "late", late[0].body)
	require.Less(t, time.Since(start), 4*time.Second)

	// The state is the same on every node once applied.
	k := pop.Key{Group: "g", Topic: "T", Queue: 0}
	want, ok := l.Replica().Store().PopQueue(k)
	require.True(t, ok)
	require.Eventually(t, func() bool {
		for _, b := range tb.bs {
			q, ok := b.Replica().Store().PopQueue(k)
			if !ok || string(q.Encode()) != string(want.Encode()) {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond)
	off, _ := l.Replica().Store().ConsumerOffset("g", "T", 0)
	require.Equal(t, int64(1), off, "the consumer offset is the lowest offset in flight")

	// Bad input.
	for _, bad := range []struct {
		name string
		mod  func(*remoting.PopMessageRequestHeader)
		code int32
	}{
		{"max 0", func(h *remoting.PopMessageRequestHeader) { h.MaxMsgNums = 0 }, remoting.InvalidParameter},
		{"max 33", func(h *remoting.PopMessageRequestHeader) { h.MaxMsgNums = 33 }, remoting.InvalidParameter},
		{"invisible 0", func(h *remoting.PopMessageRequestHeader) { h.InvisibleTime = 0 }, remoting.InvalidParameter},
		{"invisible 13h", func(h *remoting.PopMessageRequestHeader) { h.InvisibleTime = (13 * time.Hour).Milliseconds() }, remoting.InvalidParameter},
		{"unknown topic", func(h *remoting.PopMessageRequestHeader) { h.Topic = "NOPE" }, remoting.TopicNotExist},
		{"unknown group", func(h *remoting.PopMessageRequestHeader) { h.ConsumerGroup = "nope" }, remoting.SubscriptionGroupNotExist},
		{"bad queue", func(h *remoting.PopMessageRequestHeader) { h.QueueID = 7 }, remoting.InvalidParameter},
		{"bad sql", func(h *remoting.PopMessageRequestHeader) { h.ExpType, h.Exp = "SQL92", "a >" }, remoting.SubscriptionParseFailed},
	} {
		resp, got := popReq(t, cf, 0, 1, time.Second, 0, bad.mod)
		require.Equal(t, bad.code, resp.Code, "%s: %s", bad.name, resp.Remark)
		require.Empty(t, got, bad.name)
	}
	forged := late[0]
	forged.ck = fmt.Sprintf("5 %d 30000 0 0 raftmq 0 5", time.Now().UnixMilli())
	forged.offset = 5
	require.Equal(t, remoting.NoMessage, ackReq(t, cf, forged).Code, "an offset beyond the queue")
	h := remoting.AckMessageRequestHeader{ConsumerGroup: "other", Topic: "T", QueueID: 0, ExtraInfo: late[0].ck, Offset: late[0].offset}
	require.Equal(t, remoting.SubscriptionGroupNotExist, invoke(t, cf, remoting.NewRequest(remoting.AckMessage, h.Encode(), nil)).Code)
	h = remoting.AckMessageRequestHeader{ConsumerGroup: "g", Topic: "T", QueueID: 0, ExtraInfo: "not a receipt", Offset: late[0].offset}
	require.Equal(t, remoting.InvalidParameter, invoke(t, cf, remoting.NewRequest(remoting.AckMessage, h.Encode(), nil)).Code)
	// A receipt presented for another (existing) group or topic.
	g2, err := json.Marshal(offsets.NewSubscriptionGroupConfig("g2"))
	require.NoError(t, err)
	require.Equal(t, remoting.Success, invoke(t, cl, remoting.NewRequest(remoting.UpdateAndCreateSubscriptionGroup, nil, g2)).Code)
	h = remoting.AckMessageRequestHeader{ConsumerGroup: "g2", Topic: "T", QueueID: 0, ExtraInfo: late[0].ck, Offset: late[0].offset}
	resp = invoke(t, cf, remoting.NewRequest(remoting.AckMessage, h.Encode(), nil))
	require.Equal(t, remoting.NoMessage, resp.Code, resp.Remark)
	ch2 := remoting.CreateTopicRequestHeader{Topic: "U", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}
	require.Equal(t, remoting.Success, invoke(t, cl, remoting.NewRequest(remoting.UpdateAndCreateTopic, ch2.Encode(), nil)).Code)
	h = remoting.AckMessageRequestHeader{ConsumerGroup: "g", Topic: "U", QueueID: 0, ExtraInfo: late[0].ck, Offset: late[0].offset}
	resp = invoke(t, cf, remoting.NewRequest(remoting.AckMessage, h.Encode(), nil))
	require.Equal(t, remoting.NoMessage, resp.Code, resp.Remark)
	require.Contains(t, resp.Remark, "offset is illegal")
	// A batch ack naming a forged offset among good ones is refused whole.
	ba := remoting.BatchAck{ConsumerGroup: "g", Topic: "T", QueueID: 0, StartOffset: late[0].offset, PopTime: 1}
	ba.SetOffsets([]int64{late[0].offset, late[0].offset + 100})
	body, err := json.Marshal(remoting.BatchAckBody{BrokerName: "raftmq", Acks: []remoting.BatchAck{ba}})
	require.NoError(t, err)
	resp = invoke(t, cf, remoting.NewRequest(remoting.BatchAckMessage, nil, body))
	require.Equal(t, remoting.NoMessage, resp.Code, resp.Remark)
	q, _ := l.Replica().Store().PopQueue(k)
	require.Contains(t, q.InFlight, late[0].offset, "a bad ack acked nothing")
	// A good batch ack acks.
	e, err := remoting.ParseExtraInfo(late[0].ck)
	require.NoError(t, err)
	ba = remoting.BatchAck{ConsumerGroup: "g", Topic: "T", QueueID: 0, StartOffset: late[0].offset, PopTime: e.PopTime, InvisibleTime: e.InvisibleTime}
	ba.SetOffsets([]int64{late[0].offset})
	body, err = json.Marshal(remoting.BatchAckBody{BrokerName: "raftmq", Acks: []remoting.BatchAck{ba}})
	require.NoError(t, err)
	resp = invoke(t, cf, remoting.NewRequest(remoting.BatchAckMessage, nil, body))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	q, _ = l.Replica().Store().PopQueue(k)
	require.NotContains(t, q.InFlight, late[0].offset)
}

// Past retryMaxTimes deliveries a message goes to %DLQ%g; an orderly
// group gets a queue's next message only once the one before is acked.
func TestPopDeadLetterAndOrder(t *testing.T) {
	tb := startBrokers(t)
	l := tb.leader()
	c := dial(t, l.ClientAddr())
	popSetup(t, c, 1, 3, func(gc *offsets.SubscriptionGroupConfig) { gc.RetryMaxTimes = 1; gc.ConsumeMessageOrderly = true })

	_, first := popReq(t, c, 0, 32, 200*time.Millisecond, 0, nil)
	require.Len(t, first, 3, "an orderly pop takes a batch")
	resp, none := popReq(t, c, 0, 32, 200*time.Millisecond, 0, nil)
	require.Equal(t, remoting.PollingTimeout, resp.Code)
	require.Empty(t, none, "nothing while the batch is in flight")
	for _, m := range first[1:] {
		require.Equal(t, remoting.Success, ackReq(t, c, m).Code)
	}
	// 0 comes back once (attempt 2), then goes to the dead-letter topic.
	var again []popped
	require.Eventually(t, func() bool {
		_, again = popReq(t, c, 0, 32, 200*time.Millisecond, 0, nil)
		return len(again) > 0
	}, 10*time.Second, 20*time.Millisecond)
	require.Len(t, again, 1)
	require.Equal(t, int64(0), again[0].offset)
	require.Equal(t, int32(1), again[0].attempts)
	e, err := remoting.ParseExtraInfo(again[0].ck)
	require.NoError(t, err)
	require.EqualValues(t, remoting.PopOrderReviveQueue, e.ReviveQid)
	require.Eventually(t, func() bool { return l.Replica().Store().MaxOffset(DLQGroupTopic("g"), 0) == 1 }, 10*time.Second, 20*time.Millisecond)
	dl := queued(t, l, DLQGroupTopic("g"))
	require.Len(t, dl["U0"], 1)
	require.Equal(t, "T", dl["U0"][0].Properties[message.PropertyDLQOriginTopic])
	q, _ := l.Replica().Store().PopQueue(pop.Key{Group: "g", Topic: "T", Queue: 0})
	require.Empty(t, q.InFlight)
	off, _ := l.Replica().Store().ConsumerOffset("g", "T", 0)
	require.Equal(t, int64(3), off)
}

// An orderly pop's queue stays blocked across a leader change: the new
// leader hands out nothing of the queue while the old leader's batch is in
// flight, and the next message once it is acked; the receipt acks through
// the new leader.
func TestPopOrderAcrossLeaderChange(t *testing.T) {
	tb := startBrokers(t)
	l := tb.leader()
	c := dial(t, l.ClientAddr())
	popSetup(t, c, 1, 4, nil)
	order := func(h *remoting.PopMessageRequestHeader) { h.Order = true }
	_, first := popReq(t, c, 0, 2, 30*time.Second, 0, order)
	require.Len(t, first, 2)
	require.Equal(t, []int64{0, 1}, []int64{first[0].offset, first[1].offset})

	old := l.cfg.ID
	require.NoError(t, l.Close())
	delete(tb.bs, old)
	nl := tb.leader()
	require.NotEqual(t, old, nl.cfg.ID)
	cn := dial(t, nl.ClientAddr())
	resp, none := popReq(t, cn, 0, 2, 30*time.Second, 0, order)
	require.Equal(t, remoting.PollingTimeout, resp.Code, resp.Remark)
	require.Empty(t, none, "the queue is blocked by the old leader's batch")
	require.Equal(t, remoting.Success, ackReq(t, cn, first[0]).Code)
	_, none = popReq(t, cn, 0, 2, 30*time.Second, 0, order)
	require.Empty(t, none, "one message of the batch is still in flight")
	require.Equal(t, remoting.Success, ackReq(t, cn, first[1]).Code)
	_, next := popReq(t, cn, 0, 2, 30*time.Second, 0, order)
	require.Len(t, next, 2)
	require.Equal(t, []int64{2, 3}, []int64{next[0].offset, next[1].offset})
	require.Equal(t, "m2", next[0].body)
}

// An orderly pop repeating the attempt id of the batch in flight gets the
// same batch, with the same receipts; another attempt id gets nothing.
func TestPopOrderAttemptID(t *testing.T) {
	tb := startBrokers(t)
	c := dial(t, tb.follower().ClientAddr())
	popSetup(t, dial(t, tb.leader().ClientAddr()), 1, 4, nil)
	attempt := func(id string) func(*remoting.PopMessageRequestHeader) {
		return func(h *remoting.PopMessageRequestHeader) { h.Order, h.AttemptID = true, id }
	}
	_, first := popReq(t, c, 0, 2, 30*time.Second, 0, attempt("A"))
	require.Len(t, first, 2)
	resp, again := popReq(t, c, 0, 2, 30*time.Second, 0, attempt("A"))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	require.Equal(t, first, again, "the same delivery again")
	_, other := popReq(t, c, 0, 2, 30*time.Second, 0, attempt("B"))
	require.Empty(t, other)
	for _, m := range again {
		require.Equal(t, remoting.Success, ackReq(t, c, m).Code, "the repeated receipts ack")
	}
	_, next := popReq(t, c, 0, 2, 30*time.Second, 0, attempt("A"))
	require.Len(t, next, 2)
	require.Equal(t, []int64{2, 3}, []int64{next[0].offset, next[1].offset})
}

// Long-polling pops wait on the node that got them, counted by
// POLLING_INFO; one past the limit is answered POLLING_FULL.
func TestPopPollingInfoAndFull(t *testing.T) {
	tb := startBrokers(t)
	f := tb.follower()
	f.pop.pollMax = 1
	c := dial(t, f.ClientAddr())
	popSetup(t, dial(t, tb.leader().ClientAddr()), 1, 0, nil)
	done := make(chan *remoting.Command, 1)
	go func() {
		h := remoting.PopMessageRequestHeader{ConsumerGroup: "g", Topic: "T", QueueID: 0, MaxMsgNums: 1, InvisibleTime: 30_000, PollTime: 3_000}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := c.Invoke(ctx, remoting.NewRequest(remoting.PopMessage, h.Encode(), nil))
		if err != nil {
			resp = remoting.NewResponse(remoting.NewRequest(remoting.PopMessage, nil, nil), -1, err.Error())
		}
		done <- resp
	}()
	require.Eventually(t, func() bool {
		resp := invoke(t, c, remoting.NewRequest(remoting.PollingInfo, map[string]string{"consumerGroup": "g", "topic": "T", "queueId": "0"}, nil))
		return resp.Code == remoting.Success && resp.ExtFields["pollingNum"] == "1"
	}, 5*time.Second, 10*time.Millisecond)
	resp, _ := popReq(t, c, 0, 1, 30*time.Second, 3*time.Second, nil)
	require.Equal(t, remoting.PollingFull, resp.Code, resp.Remark)
	require.Equal(t, remoting.PollingTimeout, (<-done).Code, "the first waits out its poll time")
	n := invoke(t, dial(t, tb.leader().ClientAddr()), remoting.NewRequest(remoting.Notification,
		map[string]string{"consumerGroup": "g", "topic": "T", "queueId": "-1", "pollTime": "0"}, nil))
	require.Equal(t, remoting.Success, n.Code, n.Remark)
	require.Equal(t, "false", n.ExtFields["hasMsg"])
}

// counterValue reads a counter.
func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, c.Write(&m))
	return m.GetCounter().GetValue()
}

// A popped message that retention deletes before it is acked is gone: the
// leader proposes dropping its record (counted and logged), so that it
// does not stay in flight for ever and the group's consumer offset moves
// past it on every node.
func TestPopDropsRecordsOfDeletedMessages(t *testing.T) {
	tb := startBrokersWith(t, func(c *Config) {
		c.SegmentSize = 16 << 10
		c.Store.Retention = store.RetentionConfig{FileReservedTime: time.Millisecond, CheckInterval: 20 * time.Millisecond,
			DeleteWhen: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23}}
	})
	l := tb.leader()
	c := dial(t, l.ClientAddr())
	popSetup(t, c, 1, 3, nil)
	resp, msgs := popReq(t, c, 0, 2, time.Hour, 0, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	require.Len(t, msgs, 2)
	k := pop.Key{Group: "g", Topic: "T", Queue: 0}
	body := strings.Repeat("x", 1000)
	for i := 0; l.Replica().Store().MinOffset("T", 0) < 2; i++ {
		require.Less(t, i, 2000, "retention deleted nothing")
		resp := invoke(t, c, sendCmd("T", 0, body, fmt.Sprint("F", i)))
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	}
	for _, b := range tb.bs {
		require.Eventually(t, func() bool {
			q, ok := b.Replica().Store().PopQueue(k)
			off, _ := b.Replica().Store().ConsumerOffset("g", "T", 0)
			return ok && len(q.InFlight) == 0 && off == 2
		}, 10*time.Second, 20*time.Millisecond, "node %d keeps the records of deleted messages", b.cfg.ID)
	}
	require.Equal(t, 2.0, counterValue(t, l.met.PopDropped))
	require.Equal(t, remoting.NoMessage, ackReq(t, c, msgs[0]).Code, "the ack of a dropped message")
}

// A long-polling pop of topic T is not woken by sends to another topic
// (no re-check for an applied entry), and wakes at once, well before
// the periodic re-check, for a send to T.
func TestPopPollWakesOnlyForItsTopic(t *testing.T) {
	tb := startBrokers(t)
	l := tb.leader()
	c := dial(t, l.ClientAddr())
	popSetup(t, c, 1, 0, nil)
	ch := remoting.CreateTopicRequestHeader{Topic: "B", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}
	require.Equal(t, remoting.Success, invoke(t, c, remoting.NewRequest(remoting.UpdateAndCreateTopic, ch.Encode(), nil)).Code)
	done := make(chan []popped, 1)
	go func() {
		pc := dial(t, l.ClientAddr())
		h := remoting.PopMessageRequestHeader{ConsumerGroup: "g", Topic: "T", QueueID: 0, MaxMsgNums: 1, InvisibleTime: 30_000, PollTime: 10_000,
			InitMode: remoting.PopInitMin}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		resp, err := pc.Invoke(ctx, remoting.NewRequest(remoting.PopMessage, h.Encode(), nil))
		var out []popped
		if err == nil {
			for b := resp.Body; len(b) > 0; {
				m, n, err := message.Decode(b)
				if err != nil {
					break
				}
				b = b[n:]
				out = append(out, popped{body: string(m.Body), offset: m.QueueOffset})
			}
		}
		done <- out
	}()
	require.Eventually(t, func() bool { return l.pop.polling1(pollKey("g", "T", 0), 0) == 1 }, 5*time.Second, 5*time.Millisecond)
	entry := l.met.PopPollWakeups.WithLabelValues("entry")
	before := counterValue(t, entry)
	for i := range 50 {
		resp := invoke(t, c, sendCmd("B", 0, fmt.Sprint("b", i), fmt.Sprint("B", i)))
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	}
	require.Equal(t, before, counterValue(t, entry), "sends to B woke the pop of T")
	select {
	case <-done:
		t.Fatal("the pop of T answered after sends to B")
	default:
	}
	start := time.Now()
	require.Equal(t, remoting.Success, invoke(t, c, sendCmd("T", 0, "t0", "T0")).Code)
	select {
	case got := <-done:
		require.Len(t, got, 1)
		require.Equal(t, "t0", got[0].body)
		t.Logf("woken %v after the send to T", time.Since(start))
		require.Less(t, time.Since(start), popPollRecheck, "woken by the periodic re-check, not by the send")
	case <-time.After(5 * time.Second):
		t.Fatal("the pop of T did not wake for a send to T")
	}
	require.Greater(t, counterValue(t, entry), before)
}

// Concurrent pops of one queue are pipelined (each built from the pops in
// flight, not from the applied state) and still hand out each message
// once, after its own entry applied: every offset once, no two pops
// overlapping, and the queue's applied cursor covers what was handed out.
func TestPopPipelinedOneQueue(t *testing.T) {
	tb := startBrokers(t)
	l := tb.leader()
	c := dial(t, l.ClientAddr())
	const n = 240
	popSetup(t, c, 1, n, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type got struct {
		offs []int64
		err  error
	}
	out := make(chan got)
	const poppers = 8
	for range poppers {
		go func() {
			var g got
			defer func() { out <- g }()
			for ctx.Err() == nil {
				res, err := l.Pop(ctx, PopRequest{Group: "g", Topic: "T", QueueID: 0, Max: 4, Invisible: time.Minute, InitMode: remoting.PopInitMin})
				if err != nil {
					g.err = err
					return
				}
				if len(res.Messages) == 0 {
					return // the queue is drained (or every rest is in flight)
				}
				k := pop.Key{Group: "g", Topic: "T", Queue: 0}
				v := l.rep.Store().PopView(k, 0, 0)
				for _, m := range res.Messages {
					if m.QueueOffset >= v.Next {
						g.err = fmt.Errorf("offset %d handed out past the applied cursor %d", m.QueueOffset, v.Next)
						return
					}
					g.offs = append(g.offs, m.QueueOffset)
				}
			}
		}()
	}
	seen := map[int64]int{}
	for range poppers {
		g := <-out
		require.NoError(t, g.err)
		for _, off := range g.offs {
			seen[off]++
		}
	}
	// What the poppers left (they stop at an empty answer): pop it now.
	for {
		res, err := l.Pop(ctx, PopRequest{Group: "g", Topic: "T", QueueID: 0, Max: 32, Invisible: time.Minute, InitMode: remoting.PopInitMin})
		require.NoError(t, err)
		if len(res.Messages) == 0 {
			break
		}
		for _, m := range res.Messages {
			seen[m.QueueOffset]++
		}
	}
	require.Len(t, seen, n)
	for off, k := range seen {
		require.Equal(t, 1, k, "offset %d handed out %d times", off, k)
	}
	require.Positive(t, l.pop.pipelined.Load(), "no pop was built on a pop in flight")
	t.Logf("pops built on pops in flight: %d", l.pop.pipelined.Load())
}

// The proposed state of a queue: pops build on it while pops are in
// flight in the same term; a refused pop breaks it and the next pop
// starts a new one from the applied state; it is forgotten when nothing
// is in flight; revived offsets taken by pops in flight are claimed.
func TestPopAheadLifecycle(t *testing.T) {
	p := newPopState()
	k := pop.Key{Group: "g", Topic: "T", Queue: 1}
	op := func(from, to int64, offs ...int64) *pop.Op {
		return &pop.Op{Type: pop.OpPop, Group: k.Group, Topic: k.Topic, Queue: k.Queue, From: from, To: to, Offsets: offs}
	}
	require.Nil(t, p.aheadOf(k, 3), "nothing in flight")
	op1 := op(10, 20, 4, 10, 11)
	a := p.proposed(nil, 3, op1)
	require.Same(t, a, p.aheadOf(k, 3))
	require.Nil(t, p.aheadOf(k, 4), "another term builds from the applied state")
	require.True(t, p.isClaimed(a, 4))
	require.False(t, p.isClaimed(a, 10), "only offsets below From are revived ones")
	op2 := op(20, 30, 21)
	require.Same(t, a, p.proposed(a, 3, op2))
	require.Equal(t, int64(30), p.aheadOf(k, 3).next)
	p.landed(a, op1, nil)
	require.False(t, p.isClaimed(a, 4))
	require.Same(t, a, p.aheadOf(k, 3), "op2 still in flight")
	p.landed(a, op2, pop.ErrMoved)
	require.Nil(t, p.aheadOf(k, 3))
	require.Empty(t, p.ahead, "forgotten once nothing is in flight")

	// Broken while others are in flight: the next pop starts anew.
	b1 := p.proposed(nil, 3, op(30, 40))
	p.proposed(b1, 3, op(40, 50))
	p.landed(b1, op(30, 40), pop.ErrMoved)
	require.Nil(t, p.aheadOf(k, 3))
	fresh := p.proposed(nil, 3, op(35, 45))
	require.NotSame(t, b1, fresh)
	require.Same(t, fresh, p.aheadOf(k, 3))
	p.landed(b1, op(40, 50), nil) // the old one's last pop: the new one stays
	require.Same(t, fresh, p.aheadOf(k, 3))
	p.breakAhead(fresh)
	require.Nil(t, p.aheadOf(k, 3))
}

// TestPopAckBatchOutcomes: a batch ack of one pop's receipts, mixed with
// a stale one, a repeat, one never popped and one of another pop, gets
// each receipt's own outcome, in request order, and leaves every node the
// state its acks one at a time would.
func TestPopAckBatchOutcomes(t *testing.T) {
	tb := startBrokers(t)
	l := tb.leader()
	popSetup(t, dial(t, l.ClientAddr()), 1, 8, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := PopRequest{Group: "g", Topic: "T", QueueID: 0, Max: 5, Invisible: time.Minute, InitMode: remoting.PopInitMin}
	first, err := l.Pop(ctx, req)
	require.NoError(t, err)
	require.Len(t, first.Messages, 5)
	second, err := l.Pop(ctx, req)
	require.NoError(t, err)
	require.Len(t, second.Messages, 3)
	r := func(i int) Receipt { return first.Messages[i].Receipt }
	changed, err := l.PopChangeInvisible(ctx, r(3), time.Minute)
	require.NoError(t, err)
	require.Greater(t, changed.PopTime, r(3).PopTime)
	unknown := r(0)
	unknown.Offset = 100

	errs, err := l.PopAck(ctx, []Receipt{r(0), r(1), r(3), second.Messages[0].Receipt, r(1), unknown, r(4)})
	require.NoError(t, err)
	require.Len(t, errs, 7)
	for i, want := range []error{nil, nil, ErrReceiptExpired, nil, nil, ErrReceiptUnknown, nil} {
		if want == nil {
			require.NoError(t, errs[i], "receipt %d", i)
		} else {
			require.ErrorIs(t, errs[i], want, "receipt %d", i)
		}
	}
	// What is left in flight: 2 (not acked), 3 (changed), 6 and 7.
	k := pop.Key{Group: "g", Topic: "T", Queue: 0}
	want := []int64{2, 3, 6, 7}
	idx := l.Replica().Node().Status().Applied
	for _, b := range tb.bs {
		require.Eventually(t, func() bool { return b.Replica().Node().Status().Applied >= idx }, 10*time.Second, 5*time.Millisecond)
		q, ok := b.Replica().Store().PopQueue(k)
		require.True(t, ok)
		var got []int64
		for _, rec := range q.Sorted() {
			got = append(got, rec.Offset)
		}
		require.Equal(t, want, got, "node %d", b.cfg.ID)
	}
}

// A batch ack to a leader past its term's read barrier is taken on the
// connection's reader and answered from the applier (inlineBatchAck),
// directly or forwarded by a follower, with the handler's outcomes: a
// stale receipt among good ones fails the request with the count, the
// good ones are acked, and acking them again succeeds (idempotent).
func TestPopBatchAckInline(t *testing.T) {
	tb := startBrokers(t)
	l := tb.leader()
	cl := dial(t, l.ClientAddr())
	cf := dial(t, tb.follower().ClientAddr())
	popSetup(t, cl, 1, 6, nil)
	resp, msgs := popReq(t, cl, 0, 3, time.Minute, 0, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	require.Len(t, msgs, 3)
	e, err := remoting.ParseExtraInfo(msgs[0].ck)
	require.NoError(t, err)
	batch := func(popTime int64, offs ...int64) *remoting.Command {
		var acks []remoting.BatchAck
		for _, off := range offs {
			a := remoting.BatchAck{ConsumerGroup: "g", Topic: "T", QueueID: 0, StartOffset: off, PopTime: popTime, InvisibleTime: e.InvisibleTime}
			a.SetOffsets([]int64{off})
			acks = append(acks, a)
		}
		body, err := json.Marshal(remoting.BatchAckBody{BrokerName: "raftmq", Acks: acks})
		require.NoError(t, err)
		return remoting.NewRequest(remoting.BatchAckMessage, nil, body)
	}
	before := l.pop.inlineAcks.Load()
	// 0 and 1 are acked; 2 with a pop time it was not popped at is
	// expired; 0 again (idempotent) and 2 are acked.
	resp = invoke(t, cl, batch(e.PopTime, msgs[0].offset, msgs[1].offset))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	resp = invoke(t, cf, batch(e.PopTime-1, msgs[2].offset))
	require.Equal(t, remoting.NoMessage, resp.Code, resp.Remark)
	require.Contains(t, resp.Remark, "1 of 1 acks not carried out")
	resp = invoke(t, cf, batch(e.PopTime, msgs[0].offset, msgs[2].offset))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	require.Equal(t, before+3, l.pop.inlineAcks.Load(), "every batch ack taken on the leader's reader")
	q, ok := l.Replica().Store().PopQueue(pop.Key{Group: "g", Topic: "T", Queue: 0})
	require.True(t, ok)
	require.Empty(t, q.InFlight, "all three acked")
}
