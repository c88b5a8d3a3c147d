package interop

import (
	"context"
	"fmt"
	"strings"
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
	g.sub(t, "DeadLetter", func(t *testing.T) { testDeadLetter(t, g) })
	g.sub(t, "TimerMessage", func(t *testing.T) { testTimer(t, g) })
	g.sub(t, "TransactionCheckBack", func(t *testing.T) { testTransactionCheckBack(t, g) })
}

// testDeadLetter: a message its consumer fails every time is given again
// until the group's maxReconsumeTimes (here the consumer's, 2), then goes
// to the group's %DLQ% topic, with its body, keys and RETRY_TOPIC, and is
// not given again. The consumer asks for delay level 1 (1 s) between
// tries, as ConsumeConcurrentlyContext allows.
func testDeadLetter(t *testing.T, g *group) {
	topic, grp := uniq("dlq"), uniq("cg")
	g.createTopic(t, topic, 1)
	// As in testRetryLater: a first consumer creates the group and its
	// retry topic, so the tested one sees the retry topic's route.
	startConsumer(t, g, "warm", grp, topic, consumer.MessageSelector{}, newInbox()).shutdown()
	box := newInbox()
	c, err := rocketmq.NewPushConsumer(consumer.WithNsResolver(g.resolver()), consumer.WithGroupName(grp),
		consumer.WithInstance(uniq("c")), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset), consumer.WithMaxReconsumeTimes(2))
	if err != nil {
		t.Fatal(err)
	}
	err = c.Subscribe(topic, consumer.MessageSelector{}, func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		box.add("c", msgs...)
		if cc, ok := primitive.GetConcurrentlyCtx(ctx); ok {
			cc.DelayLevelWhenNextConsume = 1
		}
		for _, m := range msgs {
			if string(m.Body) == "poison" {
				return consumer.ConsumeRetryLater, nil
			}
		}
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Shutdown() })
	key := uniq("poison-key")
	p := newProducer(t, g)
	m := message(topic, "poison")
	m.WithKeys([]string{key})
	sendSync(t, p, m)
	var found []queried
	if err := poll(60*time.Second, func() bool {
		found, _ = query(t, g, "--topic", "%DLQ%"+grp, "--key", key)
		return len(found) > 0
	}); err != nil {
		t.Fatalf("the message was not in %%DLQ%%%s 60 s after it was sent; delivered %d times", grp, len(box.deliveries("poison")))
	}
	time.Sleep(3 * time.Second) // a fourth delivery would come within a second or two
	ds := box.deliveries("poison")
	if len(ds) != 3 {
		t.Errorf("delivered %d times, want 3 (the first try and 2 retries)", len(ds))
	}
	for i, d := range ds {
		if d.msg.ReconsumeTimes != int32(i) || d.msg.Topic != topic {
			t.Errorf("delivery %d: topic %s reconsumeTimes %d, want %s and %d", i, d.msg.Topic, d.msg.ReconsumeTimes, topic, i)
		}
	}
	if len(found) != 1 || found[0].Body != "poison" || found[0].Properties["RETRY_TOPIC"] != topic || found[0].MsgID != ds[0].msg.MsgId {
		t.Errorf("dead letters: %+v; want one, body poison, RETRY_TOPIC %s, msgId %s", found, topic, ds[0].msg.MsgId)
	}
	// An operator lists the dead letters and sends them back: the group
	// is given the message again, counted from 0.
	out, err := g.cli("admin", "dlq", "list", "--group", grp, "--json")
	if err != nil || !strings.Contains(out, `"body":"poison"`) || !strings.Contains(out, ds[0].msg.MsgId) {
		t.Fatalf("admin dlq list: %v\n%s", err, out)
	}
	if out, err := g.cli("admin", "dlq", "resend", "--group", grp, "--uniq", ds[0].msg.MsgId); err != nil {
		t.Fatalf("admin dlq resend: %v\n%s", err, out)
	}
	if err := poll(20*time.Second, func() bool { return len(box.deliveries("poison")) >= 4 }); err != nil {
		t.Fatalf("a dead letter sent back with admin dlq resend was not given again within 20 s")
	}
	if d := box.deliveries("poison")[3]; d.msg.ReconsumeTimes != 0 || d.msg.Topic != topic {
		t.Errorf("resent dead letter delivered with topic %s reconsumeTimes %d; want %s and 0", d.msg.Topic, d.msg.ReconsumeTimes, topic)
	}
}

// testTimer: a RocketMQ 5 timer message (TIMER_DELAY_SEC) is delivered no
// sooner than its delay, and not much later, under its own topic.
func testTimer(t *testing.T, g *group) {
	topic := uniq("timer")
	g.createTopic(t, topic, 1)
	box := newInbox()
	startConsumer(t, g, "c", uniq("cg"), topic, consumer.MessageSelector{}, box)
	p := newProducer(t, g)
	// A first pull that overtakes the consumer's heartbeat is refused
	// (SUBSCRIPTION_NOT_EXIST, as RocketMQ's broker answers), and the
	// client pulls again 3 s later: wait until it consumes, so that the
	// order below is the broker's and not the client's start-up.
	sendSync(t, p, message(topic, "ready"))
	box.waitAll(t, 15*time.Second, "the first message", []string{"ready"})
	sent := time.Now()
	m := message(topic, "timed")
	m.WithProperty("TIMER_DELAY_SEC", "3")
	sendSync(t, p, m)
	sendSync(t, p, message(topic, "now"))
	box.waitAll(t, 15*time.Second, "the message sent without a timer", []string{"now"})
	if n := len(box.deliveries("timed")); n > 0 {
		t.Errorf("a 3 s timer message was delivered before the message sent after it")
	}
	box.waitAll(t, 30*time.Second, "the timer message", []string{"timed"})
	ds := box.deliveries("timed")
	at := ds[0].at.Sub(sent)
	t.Logf("3 s timer message delivered after %v", at.Round(time.Millisecond))
	if at < 2900*time.Millisecond || at > 8*time.Second {
		t.Errorf("a 3 s timer message was delivered %v after it was sent", at.Round(time.Millisecond))
	}
	if len(ds) != 1 || ds[0].msg.Topic != topic {
		t.Errorf("timer message delivered %d times, topic %s", len(ds), ds[0].msg.Topic)
	}
}

// checkListener leaves every transaction unknown and answers check-backs
// from decide.
type checkListener struct {
	mu      sync.Mutex
	checked map[string]int
	decide  func(body string) primitive.LocalTransactionState
}

func (l *checkListener) ExecuteLocalTransaction(*primitive.Message) primitive.LocalTransactionState {
	return primitive.UnkonwnState
}

func (l *checkListener) CheckLocalTransaction(m *primitive.MessageExt) primitive.LocalTransactionState {
	l.mu.Lock()
	l.checked[string(m.Body)]++
	l.mu.Unlock()
	return l.decide(string(m.Body))
}

// testTransactionCheckBack: transactions their producer leaves unknown are
// checked back (CHECK_TRANSACTION_STATE) after the broker's transaction
// timeout (6 s) and end as the check answers: the one committed then is
// delivered, the one rolled back never is.
func testTransactionCheckBack(t *testing.T, g *group) {
	topic := uniq("txcheck")
	g.createTopic(t, topic, 1)
	box := newInbox()
	startConsumer(t, g, "c", uniq("cg"), topic, consumer.MessageSelector{}, box)
	l := &checkListener{checked: map[string]int{}, decide: func(body string) primitive.LocalTransactionState {
		if body == "check-commit" {
			return primitive.CommitMessageState
		}
		return primitive.RollbackMessageState
	}}
	tp := startTxProducer(t, g, l)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sent := time.Now()
	for _, body := range []string{"check-commit", "check-rollback"} {
		res, err := tp.SendMessageInTransaction(ctx, message(topic, body))
		if err != nil || res.Status != primitive.SendOK {
			t.Fatalf("SendMessageInTransaction %s: %v %v", body, res, err)
		}
	}
	box.waitAll(t, 30*time.Second, "the transaction committed by a check-back", []string{"check-commit"})
	at := box.deliveries("check-commit")[0].at.Sub(sent)
	t.Logf("committed by a check-back %v after it was sent", at.Round(time.Millisecond))
	if at < 5*time.Second {
		t.Errorf("a transaction left unknown was delivered %v after it was sent, before the 6 s transaction timeout", at.Round(time.Millisecond))
	}
	p := newProducer(t, g)
	sendSync(t, p, message(topic, "marker"))
	box.waitAll(t, 15*time.Second, "a marker sent after the check-backs", []string{"marker"})
	time.Sleep(2 * time.Second)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.checked["check-commit"] != 1 || l.checked["check-rollback"] != 1 {
		t.Errorf("check-backs: %v; want one for each transaction", l.checked)
	}
	if n := len(box.deliveries("check-rollback")); n > 0 {
		t.Errorf("a transaction rolled back by its check-back was delivered %d times", n)
	}
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
	tp := startTxProducer(t, g, l)
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

// startTxProducer starts a transaction producer of a new group with l as
// its listener, shut down when the test ends.
func startTxProducer(t *testing.T, g *group, l primitive.TransactionListener) rocketmq.TransactionProducer {
	t.Helper()
	tp, err := rocketmq.NewTransactionProducer(l, producer.WithNsResolver(g.resolver()),
		producer.WithGroupName(uniq("txpg")), producer.WithInstanceName(uniq("tp")))
	if err != nil {
		t.Fatal(err)
	}
	if err := tp.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tp.Shutdown() })
	return tp
}
