package interop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

var seq atomic.Int64

// uniq returns a name for a topic, group or client instance of this run.
// RocketMQ's client shares one client instance per instance name in a
// process, so every producer and consumer gets its own.
func uniq(kind string) string { return fmt.Sprintf("it-%s-%s-%d", kind, runID, seq.Add(1)) }

// newProducer starts a producer of a group of its own on g's nodes.
func newProducer(t *testing.T, g *group, opts ...producer.Option) rocketmq.Producer {
	t.Helper()
	opts = append([]producer.Option{producer.WithNsResolver(g.resolver()), producer.WithGroupName(uniq("pg")),
		producer.WithInstanceName(uniq("p"))}, opts...)
	p, err := rocketmq.NewProducer(opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatalf("producer start: %v", err)
	}
	t.Cleanup(func() { _ = p.Shutdown() })
	return p
}

// message builds a message with a user property "n".
func message(topic, body string, props ...string) *primitive.Message {
	m := primitive.NewMessage(topic, []byte(body))
	for i := 0; i+1 < len(props); i += 2 {
		m.WithProperty(props[i], props[i+1])
	}
	return m
}

// sendSync sends one message and fails t unless the broker stored it.
func sendSync(t *testing.T, p rocketmq.Producer, m *primitive.Message) *primitive.SendResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := p.SendSync(ctx, m)
	if err != nil {
		t.Fatalf("SendSync %q to %s: %v", m.Body, m.Topic, err)
	}
	if res.Status != primitive.SendOK {
		t.Fatalf("SendSync %q to %s: status %d (%v)", m.Body, m.Topic, res.Status, res)
	}
	return res
}

// queueSelector sends a message to the queue whose id is in its "q"
// property, through the first broker name listing that queue other than
// the one a failed attempt just used.
type queueSelector struct{}

func (queueSelector) Select(m *primitive.Message, mqs []*primitive.MessageQueue, last string) *primitive.MessageQueue {
	q, err := strconv.Atoi(m.GetProperty("q"))
	if err != nil {
		return nil
	}
	var fallback *primitive.MessageQueue
	for _, mq := range mqs {
		if mq.QueueId == q {
			if mq.BrokerName != last {
				return mq
			}
			fallback = mq
		}
	}
	return fallback
}

// delivery is one message handed to a consumer's callback.
type delivery struct {
	consumer string
	at       time.Time
	msg      *primitive.MessageExt
}

func (d delivery) body() string { return string(d.msg.Body) }

// inbox records every delivery to the consumers sharing it, in the order
// their callbacks ran.
type inbox struct {
	mu     sync.Mutex
	all    []delivery
	byBody map[string][]int
}

func newInbox() *inbox { return &inbox{byBody: map[string][]int{}} }

func (b *inbox) add(consumer string, msgs ...*primitive.MessageExt) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, m := range msgs {
		b.byBody[string(m.Body)] = append(b.byBody[string(m.Body)], len(b.all))
		b.all = append(b.all, delivery{consumer: consumer, at: time.Now(), msg: m})
	}
}

// deliveries returns the deliveries of body.
func (b *inbox) deliveries(body string) []delivery {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []delivery
	for _, i := range b.byBody[body] {
		out = append(out, b.all[i])
	}
	return out
}

// snapshot returns every delivery so far.
func (b *inbox) snapshot() []delivery {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]delivery(nil), b.all...)
}

// missing returns the bodies of want that no consumer has been given (at
// most the first 10, and how many in all).
func (b *inbox) missing(want []string) ([]string, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	n := 0
	for _, w := range want {
		if len(b.byBody[w]) == 0 {
			if len(out) < 10 {
				out = append(out, w)
			}
			n++
		}
	}
	return out, n
}

// byConsumer returns, for consumer name, the distinct bodies it was given.
func (b *inbox) byConsumer(name string) map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]int{}
	for _, d := range b.all {
		if d.consumer == name {
			out[string(d.msg.Body)]++
		}
	}
	return out
}

// waitAll waits until every body of want was delivered at least once.
func (b *inbox) waitAll(t *testing.T, timeout time.Duration, what string, want []string) {
	t.Helper()
	if err := poll(timeout, func() bool { _, n := b.missing(want); return n == 0 }); err != nil {
		some, n := b.missing(want)
		t.Fatalf("%s: %d of %d messages not delivered within %v (first: %v)", what, n, len(want), timeout, some)
	}
}

// pushConsumer is a started RocketMQ push consumer.
type pushConsumer struct {
	name string
	c    rocketmq.PushConsumer
	once sync.Once
	t    *testing.T
}

// startConsumer starts a push consumer named name (its instance name) of
// group on topic that records what it is given in box and acknowledges it.
// By default it starts from the first offset of a queue the group has no
// committed offset for.
func startConsumer(t *testing.T, g *group, name, grp, topic string, sel consumer.MessageSelector, box *inbox, opts ...consumer.Option) *pushConsumer {
	t.Helper()
	return startConsumerFunc(t, g, name, grp, topic, sel, box, func(*primitive.MessageExt) consumer.ConsumeResult { return consumer.ConsumeSuccess }, opts...)
}

// startConsumerFunc is startConsumer with each message's answer given by
// answer (called after the message was recorded; the consumer is given
// one message a callback, the client's default).
func startConsumerFunc(t *testing.T, g *group, name, grp, topic string, sel consumer.MessageSelector, box *inbox,
	answer func(*primitive.MessageExt) consumer.ConsumeResult, opts ...consumer.Option) *pushConsumer {
	t.Helper()
	opts = append([]consumer.Option{consumer.WithNsResolver(g.resolver()), consumer.WithGroupName(grp),
		consumer.WithInstance(uniq(name)), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset)}, opts...)
	c, err := rocketmq.NewPushConsumer(opts...)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Subscribe(topic, sel, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		box.add(name, msgs...)
		for _, m := range msgs {
			if r := answer(m); r != consumer.ConsumeSuccess {
				return r, nil
			}
		}
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		t.Fatalf("subscribe %s: %v", topic, err)
	}
	if err := c.Start(); err != nil {
		t.Fatalf("start consumer %s of %s: %v", name, grp, err)
	}
	pc := &pushConsumer{name: name, c: c, t: t}
	t.Cleanup(pc.shutdown)
	return pc
}

// shutdown shuts the consumer down (once), failing the test if that hangs.
func (pc *pushConsumer) shutdown() {
	pc.once.Do(func() {
		done := make(chan struct{})
		go func() { _ = pc.c.Shutdown(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			pc.t.Errorf("consumer %s: Shutdown still runs after 30 s", pc.name)
		}
	})
}

// removeLocalOffsets deletes the offset files a broadcasting consumer of
// group left in the client's local offset directory.
func removeLocalOffsets(group string) {
	dir := os.Getenv("rocketmq.client.localOffsetStoreDir")
	if dir == "" {
		dir = filepath.Join(os.Getenv("HOME"), ".rocketmq_client_go")
	}
	// The client names the files <dir>/<group>/<client id>/offset.json.
	_ = os.RemoveAll(filepath.Join(dir, group))
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// queuesOf returns the sorted queue ids of the deliveries to consumer name
// among bodies.
func queuesOf(b *inbox, name string, bodies []string) []int {
	set := map[int]bool{}
	for _, body := range bodies {
		for _, d := range b.deliveries(body) {
			if d.consumer == name {
				set[d.msg.Queue.QueueId] = true
			}
		}
	}
	var out []int
	for q := range set {
		out = append(out, q)
	}
	sort.Ints(out)
	return out
}

func bodies(prefix string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%s%d", prefix, i))
	}
	return out
}

func joinInts(xs []int) string {
	var s []string
	for _, x := range xs {
		s = append(s, strconv.Itoa(x))
	}
	return "[" + strings.Join(s, " ") + "]"
}
