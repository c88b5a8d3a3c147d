package interop

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// TestRocketMQFeatures covers RocketMQ features a Go client user meets
// beyond sending and consuming: a consumer's retry (ConsumeRetryLater),
// delayed messages and transactional messages. One group, a subtest each.
func TestRocketMQFeatures(t *testing.T) {
	g := startGroup(t)
	g.sub(t, "ConsumeRetryLater", func(t *testing.T) { testRetryLater(t, g) })
	g.sub(t, "DelayedMessage", func(t *testing.T) { testDelayed(t, g) })
	g.sub(t, "Transaction", func(t *testing.T) { testTransaction(t, g) })
}

// testRetryLater: a message a concurrent consumer answers ConsumeRetryLater
// is given again, as RocketMQ does it: sent back (CONSUMER_SEND_MSG_BACK)
// to the group's %RETRY% topic with delay level 3 + reconsumeTimes, so
// redelivered 10 s later under its own topic, msgId and body with
// reconsumeTimes 1; and the group's committed offset then covers the
// original queue.
func testRetryLater(t *testing.T, g *group) {
	topic, grp := uniq("retry"), uniq("cg")
	g.createTopic(t, topic, 1)
	// A consumer learns its group's %RETRY% topic from the route it reads
	// when it starts, or 30 s later. The broker creates that topic on the
	// group's first heartbeat, which comes after that first read: let a
	// first consumer of the group heartbeat, then start the one tested.
	warm := startConsumer(t, g, "warm", grp, topic, consumer.MessageSelector{}, newInbox())
	retryTopic := "%RETRY%" + grp
	var routeErr error
	if err := poll(15*time.Second, func() bool {
		_, routeErr = newAdmin(t, g.addrs()).FetchPublishMessageQueues(context.Background(), retryTopic)
		return routeErr == nil
	}); err != nil {
		t.Fatalf("no route for %s 15 s after a consumer of the group started: %v", retryTopic, routeErr)
	}
	warm.shutdown()
	box := newInbox()
	var once sync.Once
	startConsumerFunc(t, g, "c", grp, topic, consumer.MessageSelector{}, box, func(m *primitive.MessageExt) consumer.ConsumeResult {
		r := consumer.ConsumeSuccess
		if string(m.Body) == "retry-me" {
			once.Do(func() { r = consumer.ConsumeRetryLater })
		}
		return r
	})
	p := newProducer(t, g)
	sendSync(t, p, message(topic, "retry-me", "n", "1"))
	sendSync(t, p, message(topic, "after"))
	box.waitAll(t, 15*time.Second, "first deliveries", []string{"retry-me", "after"})
	if err := poll(40*time.Second, func() bool { return len(box.deliveries("retry-me")) >= 2 }); err != nil {
		t.Fatalf("a message answered ConsumeRetryLater was not given again within 40 s")
	}
	ds := box.deliveries("retry-me")
	first, again := ds[0], ds[1]
	if again.msg.ReconsumeTimes != 1 || again.msg.Topic != topic || again.msg.MsgId != first.msg.MsgId || again.msg.GetProperty("n") != "1" {
		t.Errorf("redelivery: topic %s msgId %s reconsumeTimes %d n %q; want topic %s msgId %s reconsumeTimes 1 n \"1\"",
			again.msg.Topic, again.msg.MsgId, again.msg.ReconsumeTimes, again.msg.GetProperty("n"), topic, first.msg.MsgId)
	}
	// RocketMQ's first retry is delay level 3: 10 s.
	d := again.at.Sub(first.at)
	t.Logf("redelivered %v after the first delivery", d.Round(time.Millisecond))
	if d < 8*time.Second || d > 25*time.Second {
		t.Errorf("redelivered %v after the first delivery; RocketMQ redelivers a first retry after 10 s (delay level 3)", d.Round(time.Millisecond))
	}
	if err := poll(20*time.Second, func() bool { return committedOffset(t, g, grp, topic, 0) == 2 }); err != nil {
		t.Errorf("the group's committed offset of %s queue 0 is %d, want 2 (both messages consumed)", topic, committedOffset(t, g, grp, topic, 0))
	}
	if n := len(box.deliveries("retry-me")); n != 2 {
		t.Errorf("retry-me delivered %d times, want 2", n)
	}
}

// testDelayed: a message sent with delay level 2 (RocketMQ's default
// levels: 5 s) is delivered no sooner than 5 s after it was sent, under its
// own topic; a message sent with it without delay is delivered at once.
func testDelayed(t *testing.T, g *group) {
	topic := uniq("delay")
	g.createTopic(t, topic, 2)
	box := newInbox()
	startConsumer(t, g, "c", uniq("cg"), topic, consumer.MessageSelector{}, box)
	p := newProducer(t, g)
	sent := time.Now()
	d := message(topic, "delayed")
	d.WithDelayTimeLevel(2)
	sendSync(t, p, d)
	sendSync(t, p, message(topic, "now"))
	box.waitAll(t, 15*time.Second, "the message sent without delay", []string{"now"})
	box.waitAll(t, 30*time.Second, "the delayed message", []string{"delayed"})
	ds := box.deliveries("delayed")
	if at := ds[0].at.Sub(sent); at < 4500*time.Millisecond {
		t.Errorf("a message of delay level 2 (5 s) was delivered %v after it was sent", at.Round(time.Millisecond))
	}
	if ds[0].msg.Topic != topic || len(ds) != 1 {
		t.Errorf("delayed message delivered %d times, topic %s", len(ds), ds[0].msg.Topic)
	}
}

// txListener decides each transactional message by its body.
type txListener struct {
	beforeCommit func() // runs before "tx-commit" is committed
}

func (l *txListener) ExecuteLocalTransaction(m *primitive.Message) primitive.LocalTransactionState {
	switch string(m.Body) {
	case "tx-commit":
		l.beforeCommit()
		return primitive.CommitMessageState
	case "tx-rollback":
		return primitive.RollbackMessageState
	}
	return primitive.UnkonwnState
}

func (l *txListener) CheckLocalTransaction(m *primitive.MessageExt) primitive.LocalTransactionState {
	return l.ExecuteLocalTransaction(&m.Message)
}

// testTransaction: a transactional (half) message is invisible until its
// producer commits it (END_TRANSACTION), then delivered; a rolled-back one
// is never delivered. An orderly consumer of a one-queue topic is given
// the queue's messages one at a time, in order, so a marker sent after the
// half message and consumed shows the half message was not deliverable.
func testTransaction(t *testing.T, g *group) {
	topic := uniq("tx")
	g.createTopic(t, topic, 1)
	box := newInbox()
	startConsumer(t, g, "c", uniq("cg"), topic, consumer.MessageSelector{}, box, consumer.WithConsumerOrder(true))
	p := newProducer(t, g)
	var visibleEarly, markerErr string
	l := &txListener{beforeCommit: func() {
		if err := func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := p.SendSync(ctx, message(topic, "marker-1")); err != nil {
				return err
			}
			return poll(15*time.Second, func() bool { return len(box.deliveries("marker-1")) > 0 })
		}(); err != nil {
			markerErr = fmt.Sprintf("marker-1 (sent after the half message) not consumed: %v", err)
		}
		if n := len(box.deliveries("tx-commit")); n > 0 {
			visibleEarly = fmt.Sprintf("the half message was delivered %d times before its producer committed it", n)
		}
	}}
	tp, err := rocketmq.NewTransactionProducer(l, producer.WithNsResolver(g.resolver()),
		producer.WithGroupName(uniq("txpg")), producer.WithInstanceName(uniq("tp")))
	if err != nil {
		t.Fatal(err)
	}
	if err := tp.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tp.Shutdown() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, body := range []string{"tx-commit", "tx-rollback"} {
		res, err := tp.SendMessageInTransaction(ctx, message(topic, body))
		if err != nil || res.Status != primitive.SendOK {
			t.Fatalf("SendMessageInTransaction %s: %v %v", body, res, err)
		}
	}
	if markerErr != "" {
		t.Error(markerErr)
	}
	if visibleEarly != "" {
		t.Error(visibleEarly)
	}
	sendSync(t, p, message(topic, "marker-2"))
	box.waitAll(t, 30*time.Second, "the committed message and the marker sent after both transactions ended", []string{"tx-commit", "marker-2"})
	if n := len(box.deliveries("tx-rollback")); n > 0 {
		t.Errorf("a rolled-back transactional message was delivered %d times", n)
	}
	if m := box.deliveries("tx-commit")[0].msg; m.GetProperty(primitive.PropertyTransactionPrepared) == "true" {
		t.Errorf("the committed message is delivered still marked prepared (%s=true)", primitive.PropertyTransactionPrepared)
	}
}
