package client

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// delivery is what a callback saw of one message.
type delivery struct {
	body, topic, msgID string
	commitLogOffset    int64
	reconsumeTimes     int32
	retryTopic         string // RETRY_TOPIC property
	origin             string // ORIGIN_MESSAGE_ID property
}

type deliveries struct {
	mu  sync.Mutex
	got []delivery
}

func (d *deliveries) add(m *MessageExt) {
	rt, _ := m.Property(message.PropertyRetryTopic)
	origin, _ := m.Property(message.PropertyOriginMessageID)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.got = append(d.got, delivery{body: string(m.Body), topic: m.Topic, msgID: m.MsgID,
		commitLogOffset: m.CommitLogOffset, reconsumeTimes: m.ReconsumeTimes, retryTopic: rt, origin: origin})
}

// of returns the deliveries of body, in order.
func (d *deliveries) of(body string) []delivery {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []delivery
	for _, x := range d.got {
		if x.body == body {
			out = append(out, x)
		}
	}
	return out
}

// storedTopics maps the commit log offsets of the records stored in the
// topics' queue 0 to their topic: it tells a retry-topic delivery (whose
// topic the consumer restores) from an original one.
func storedTopics(g *fakeGroup, topics ...string) map[int64]string {
	out := map[int64]string{}
	for _, topic := range topics {
		for _, m := range g.records(topic, 0) {
			out[m.PhysicalOffset] = topic
		}
	}
	return out
}

// sendBackHeaders decodes the CONSUMER_SEND_MSG_BACK requests node n got.
func sendBackHeaders(t *testing.T, n *fakeNode) []remoting.ConsumerSendMsgBackRequestHeader {
	t.Helper()
	var out []remoting.ConsumerSendMsgBackRequestHeader
	for _, r := range n.requests(remoting.ConsumerSendMsgBack) {
		h, err := remoting.DecodeConsumerSendMsgBackRequestHeader(r.ExtFields)
		require.NoError(t, err)
		out = append(out, h)
	}
	return out
}

// sendsTo decodes the send requests to topic that node n got.
func sendsTo(t *testing.T, n *fakeNode, topic string) []remoting.SendMessageRequestHeader {
	t.Helper()
	var out []remoting.SendMessageRequestHeader
	for _, r := range append(n.requests(remoting.SendMessage), n.requests(remoting.SendMessageV2)...) {
		h, err := remoting.DecodeSendMessageRequestHeader(r.Code, r.ExtFields)
		require.NoError(t, err)
		if h.Topic == topic {
			out = append(out, h)
		}
	}
	return out
}

// TestPushConsumerSendsBackRetryLater: a concurrent clustering consumer
// whose callback asks to retry sends the message back with
// CONSUMER_SEND_MSG_BACK (commit log offset, group, delay level 0, origin
// id and topic, MaxReconsumeTimes); the message then counts as consumed,
// so the queue's offset passes it at once (RetryDelay is far longer than
// the test), and it comes back from the retry topic with its original
// topic and ReconsumeTimes 1.
func TestPushConsumerSendsBackRetryLater(t *testing.T) {
	g := newFakeGroup(t, 1)
	g.addTopic("T", 1)
	produce(t, g, "T", []int32{0}, 0, 5, "")

	var d deliveries
	var failed atomic.Int32
	o := fastOptions("G", "T")
	o.RetryDelay = time.Hour // a local retry would never come in time
	o.MaxReconsumeTimes = 5
	p := startPushConsumer(t, g, o, func(_ context.Context, ms []*MessageExt) ConsumeResult {
		m := ms[0]
		d.add(m)
		if string(m.Body) == "0-2" && m.ReconsumeTimes == 0 {
			failed.Add(1)
			return ConsumeRetryLater
		}
		return ConsumeSuccess
	})
	require.Eventually(t, func() bool { return len(d.of("0-2")) == 2 }, 5*time.Second, 5*time.Millisecond)
	require.Eventually(t, func() bool { return g.offset("G", "T", 0) == 5 }, 5*time.Second, 5*time.Millisecond,
		"the sent-back message no longer holds the offset")
	require.Equal(t, int32(1), failed.Load())

	first, again := d.of("0-2")[0], d.of("0-2")[1]
	backs := sendBackHeaders(t, g.nodes[0])
	require.Len(t, backs, 1)
	require.Equal(t, remoting.ConsumerSendMsgBackRequestHeader{
		Offset: first.commitLogOffset, Group: "G", DelayLevel: 0, OriginMsgID: first.msgID,
		OriginTopic: "T", MaxReconsumeTimes: 5,
	}, backs[0])
	require.Empty(t, sendsTo(t, g.nodes[0], RetryTopic("G")), "no fallback send")

	where := storedTopics(g, "T", RetryTopic("G"))
	require.Equal(t, "T", where[first.commitLogOffset])
	require.Equal(t, RetryTopic("G"), where[again.commitLogOffset], "delivered again from the retry topic")
	require.Equal(t, "T", again.topic, "original topic restored")
	require.Equal(t, int32(1), again.reconsumeTimes)
	require.Equal(t, "T", again.retryTopic)
	require.Equal(t, first.msgID, again.origin)
	require.Eventually(t, func() bool { return g.offset("G", RetryTopic("G"), 0) == 1 }, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, p.Shutdown(testCtx(t)))
}

// TestPushConsumerSendBackFallsBackToRetryTopic: when the broker refuses
// CONSUMER_SEND_MSG_BACK, the consumer sends a copy to %RETRY%<group>
// itself: properties copied plus ORIGIN_MESSAGE_ID, RETRY_TOPIC and
// DELAY=3+reconsumeTimes, without TRAN_MSG, header reconsumeTimes+1 and
// maxReconsumeTimes, keeping its UNIQ_KEY (the msgId the consumer sees).
func TestPushConsumerSendBackFallsBackToRetryTopic(t *testing.T) {
	g := newFakeGroup(t, 1)
	g.addTopic("T", 1)
	g.setRefuseSendBack(true)
	c := newTestClient(t, g, time.Second)
	orig, err := c.NewProducer(ProducerOptions{}).Send(testCtx(t), &Message{Topic: "T", Body: []byte("x"), Tags: "TagX",
		Keys: []string{"k1"}, Properties: map[string]string{"app": "v", message.PropertyTransactionPrepared: "true"}})
	require.NoError(t, err)

	var d deliveries
	o := fastOptions("G", "T")
	o.RetryDelay = time.Hour
	o.MaxReconsumeTimes = 7
	p := startPushConsumer(t, g, o, func(_ context.Context, ms []*MessageExt) ConsumeResult {
		d.add(ms[0])
		if ms[0].ReconsumeTimes < 2 {
			return ConsumeRetryLater
		}
		return ConsumeSuccess
	})
	require.Eventually(t, func() bool { return len(d.of("x")) == 3 }, 5*time.Second, 5*time.Millisecond)
	require.Eventually(t, func() bool { return g.offset("G", "T", 0) == 1 }, 5*time.Second, 5*time.Millisecond)
	require.Eventually(t, func() bool { return g.offset("G", RetryTopic("G"), 0) == 2 }, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, p.Shutdown(testCtx(t)))

	require.Len(t, sendBackHeaders(t, g.nodes[0]), 2, "CONSUMER_SEND_MSG_BACK tried first, each time")
	sends := sendsTo(t, g.nodes[0], RetryTopic("G"))
	require.Len(t, sends, 2)
	ds := d.of("x")
	for i, h := range sends {
		require.Equal(t, innerProducerGroup, h.ProducerGroup)
		require.Equal(t, int32(i+1), h.ReconsumeTimes)
		require.Equal(t, int32(7), h.MaxReconsumeTimes)
		props, err := message.DecodeProperties(h.Properties)
		require.NoError(t, err)
		require.Equal(t, orig.MsgID, props[message.PropertyOriginMessageID])
		require.Equal(t, "T", props[message.PropertyRetryTopic])
		require.Equal(t, []string{"3", "4"}[i], props[message.PropertyDelayTimeLevel])
		require.NotContains(t, props, message.PropertyTransactionPrepared)
		require.Equal(t, "v", props["app"])
		require.Equal(t, "TagX", props[message.PropertyTags])
		require.Equal(t, "k1", props[message.PropertyKeys])
		require.Equal(t, orig.MsgID, props[message.PropertyUniqKey])

		// What came back from the retry topic.
		again := ds[i+1]
		require.Equal(t, "T", again.topic)
		require.Equal(t, int32(i+1), again.reconsumeTimes)
		require.Equal(t, orig.MsgID, again.origin)
	}
}

// TestPushConsumerOrderlyDeadLetterAfterMax: an orderly consumer retries
// a failing message locally, holding its queue, until the message's
// ReconsumeTimes reaches MaxReconsumeTimes; then it sends it back with
// delay level -1 (the broker puts it in %DLQ%<group>), counts it as
// consumed and goes on with the queue, in order.
func TestPushConsumerOrderlyDeadLetterAfterMax(t *testing.T) {
	g := newFakeGroup(t, 1)
	g.addTopic("T", 1)
	produce(t, g, "T", []int32{0}, 0, 5, "")
	rec := newOrderlyRecorder(t)
	var poison atomic.Int32
	var poisonOffset atomic.Int64
	rec.fail = func(ms []*MessageExt) bool {
		if string(ms[0].Body) == "0-2" {
			require.Equal(t, poison.Load(), ms[0].ReconsumeTimes, "each local retry counts")
			poison.Add(1)
			poisonOffset.Store(ms[0].CommitLogOffset)
			return true
		}
		return false
	}
	o := fastOptions("G", "T")
	o.Orderly = true
	o.MaxReconsumeTimes = 3
	p := startPushConsumer(t, g, o, rec.consume)
	require.Eventually(t, func() bool { return slices.Equal(rec.offsets(0), []int64{0, 1, 3, 4}) }, 5*time.Second, 5*time.Millisecond,
		"%v", rec.offsets(0))
	require.Eventually(t, func() bool { return g.offset("G", "T", 0) == 5 }, 5*time.Second, 5*time.Millisecond)
	require.Equal(t, int32(4), poison.Load(), "the first delivery and MaxReconsumeTimes retries")

	backs := sendBackHeaders(t, g.nodes[0])
	require.Len(t, backs, 1, "only the last failure goes to the broker")
	require.Equal(t, remoting.ConsumerSendMsgBackRequestHeader{
		Offset: poisonOffset.Load(), Group: "G", DelayLevel: -1, OriginMsgID: backs[0].OriginMsgID,
		OriginTopic: "T", MaxReconsumeTimes: 3,
	}, backs[0])
	dlq := g.records("%DLQ%G", 0)
	require.Len(t, dlq, 1)
	require.Equal(t, "0-2", string(dlq[0].Body))
	require.Empty(t, g.records(RetryTopic("G"), 0))
	require.NoError(t, p.Shutdown(testCtx(t)))
}

// TestPushConsumerOrderlyDeadLetterPartialBatch: in a batch that fails
// past MaxReconsumeTimes, a message the broker takes for the dead-letter
// queue leaves the batch while one it does not take stays and is retried;
// the next batch skips the gap.
func TestPushConsumerOrderlyDeadLetterPartialBatch(t *testing.T) {
	g := newFakeGroup(t, 1)
	g.addTopic("T", 1)
	produce(t, g, "T", []int32{0}, 0, 6, "")
	// The broker refuses both ways back for message 2 only.
	phys2 := g.records("T", 0)[2].PhysicalOffset
	g.nodes[0].setHook(func(_ *fakeNode, req *remoting.Command) (*remoting.Command, bool) {
		switch req.Code {
		case remoting.ConsumerSendMsgBack:
			h, err := remoting.DecodeConsumerSendMsgBackRequestHeader(req.ExtFields)
			require.NoError(t, err)
			if h.Offset == phys2 {
				return remoting.NewResponse(req, remoting.SystemError, "refused by the test"), true
			}
		case remoting.SendMessageV2:
			h, err := remoting.DecodeSendMessageRequestHeader(req.Code, req.ExtFields)
			require.NoError(t, err)
			if h.Topic == RetryTopic("G") {
				return remoting.NewResponse(req, remoting.MessageIllegal, "refused by the test"), true
			}
		}
		return nil, false
	})
	rec := newOrderlyRecorder(t)
	var tries atomic.Int32
	var batches sync.Mutex
	var seen [][]int64
	rec.fail = func(ms []*MessageExt) bool {
		var offs []int64
		for _, m := range ms {
			offs = append(offs, m.QueueOffset)
		}
		batches.Lock()
		seen = append(seen, offs)
		batches.Unlock()
		return offs[0] == 2 && tries.Add(1) <= 4
	}
	o := fastOptions("G", "T")
	o.Orderly = true
	o.ConsumeBatchSize = 2
	o.PullBatchSize = 6
	o.MaxReconsumeTimes = 3
	p := startPushConsumer(t, g, o, rec.consume)
	require.Eventually(t, func() bool { return slices.Equal(rec.offsets(0), []int64{0, 1, 2, 4, 5}) }, 5*time.Second, 5*time.Millisecond,
		"%v", rec.offsets(0))
	require.Eventually(t, func() bool { return g.offset("G", "T", 0) == 6 }, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, p.Shutdown(testCtx(t)))
	batches.Lock()
	defer batches.Unlock()
	require.Equal(t, [][]int64{{0, 1}, {2, 3}, {2, 3}, {2, 3}, {2, 3}, {2, 4}, {5}}, seen)
	dlq := g.records("%DLQ%G", 0)
	require.Len(t, dlq, 1)
	require.Equal(t, "0-3", string(dlq[0].Body))
}
