package interop

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

var instances atomic.Int64

// instance names a client uniquely: RocketMQ's client shares one client
// instance per name in a process.
func instance(prefix string) string { return fmt.Sprintf("%s-%d", prefix, instances.Add(1)) }

func newProducer(t *testing.T, g *group, opts ...producer.Option) rocketmq.Producer {
	t.Helper()
	opts = append([]producer.Option{producer.WithNsResolver(g.resolver()), producer.WithGroupName(instance("pg")),
		producer.WithInstanceName(instance("p"))}, opts...)
	p, err := rocketmq.NewProducer(opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown() })
	return p
}

// received collects deliveries by body.
type received struct {
	mu    sync.Mutex
	msgs  map[string]*primitive.MessageExt
	count map[string]int
	order []string
}

func newReceived() *received {
	return &received{msgs: map[string]*primitive.MessageExt{}, count: map[string]int{}}
}

func (r *received) add(msgs ...*primitive.MessageExt) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range msgs {
		b := string(m.Body)
		r.msgs[b] = m
		r.count[b]++
		r.order = append(r.order, b)
	}
}

func (r *received) distinct() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.msgs)
}

func (r *received) has(body string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.msgs[body] != nil
}

// newPushConsumer starts a push consumer of group on topic with selector.
func newPushConsumer(t *testing.T, g *group, grp, topic string, sel consumer.MessageSelector, r *received, opts ...consumer.Option) rocketmq.PushConsumer {
	t.Helper()
	opts = append([]consumer.Option{consumer.WithNsResolver(g.resolver()), consumer.WithGroupName(grp),
		consumer.WithInstance(instance("c")), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset)}, opts...)
	c, err := rocketmq.NewPushConsumer(opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(topic, sel, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		r.add(msgs...)
		return consumer.ConsumeSuccess, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSendModesAndPushConsumer(t *testing.T) {
	g := startGroup(t)
	g.createTopic("it-send", 4)
	p := newProducer(t, g)
	ctx := context.Background()
	var want []string
	msg := func(i int) *primitive.Message {
		m := primitive.NewMessage("it-send", []byte(fmt.Sprintf("m%d", i)))
		m.WithTag(fmt.Sprintf("t%d", i%3)).WithKeys([]string{fmt.Sprintf("k%d", i)})
		m.WithProperty("seq", fmt.Sprint(i))
		want = append(want, string(m.Body))
		return m
	}
	for i := range 10 {
		res, err := p.SendSync(ctx, msg(i))
		if err != nil || res.Status != primitive.SendOK {
			t.Fatalf("SendSync %d: %v %v", i, res, err)
		}
	}
	var wg sync.WaitGroup
	var asyncErr atomic.Value
	for i := 10; i < 20; i++ {
		wg.Add(1)
		if err := p.SendAsync(ctx, func(_ context.Context, res *primitive.SendResult, err error) {
			defer wg.Done()
			if err != nil {
				asyncErr.Store(err)
			}
		}, msg(i)); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if err := asyncErr.Load(); err != nil {
		t.Fatalf("SendAsync: %v", err)
	}
	for i := 20; i < 25; i++ {
		if err := p.SendOneWay(ctx, msg(i)); err != nil {
			t.Fatalf("SendOneWay: %v", err)
		}
	}
	batch := []*primitive.Message{msg(25), msg(26), msg(27)}
	if res, err := p.SendSync(ctx, batch...); err != nil || res.Status != primitive.SendOK {
		t.Fatalf("batch SendSync: %v %v", res, err)
	}

	r := newReceived()
	c := newPushConsumer(t, g, "it-send-cg", "it-send", consumer.MessageSelector{}, r)
	defer c.Shutdown()
	eventually(t, 30*time.Second, "every message consumed", func() bool { return r.distinct() == len(want) })
	for i, body := range want {
		m := r.msgs[body]
		if m.GetTags() != fmt.Sprintf("t%d", i%3) || m.GetKeys() != fmt.Sprintf("k%d", i) || m.GetProperty("seq") != fmt.Sprint(i) {
			t.Errorf("%s: tags %q keys %q seq %q", body, m.GetTags(), m.GetKeys(), m.GetProperty("seq"))
		}
	}
}

func TestFirstSendCreatesTopic(t *testing.T) {
	g := startGroup(t)
	p := newProducer(t, g)
	res, err := p.SendSync(context.Background(), primitive.NewMessage("it-auto-created", []byte("x")))
	if err != nil || res.Status != primitive.SendOK {
		t.Fatalf("first send to a new topic: %v %v", res, err)
	}
}

func TestClusteringShareAndTakeover(t *testing.T) {
	g := startGroup(t)
	g.createTopic("it-share", 8)
	r1, r2 := newReceived(), newReceived()
	c1 := newPushConsumer(t, g, "it-share-cg", "it-share", consumer.MessageSelector{}, r1)
	c2 := newPushConsumer(t, g, "it-share-cg", "it-share", consumer.MessageSelector{}, r2)
	p := newProducer(t, g)
	send := func(from, to int) {
		for i := from; i < to; i++ {
			if _, err := p.SendSync(context.Background(), primitive.NewMessage("it-share", []byte(fmt.Sprintf("s%d", i)))); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Let the two consumers split the queues (a notification each).
	time.Sleep(3 * time.Second)
	send(0, 200)
	all := func(from, to int) bool {
		for i := from; i < to; i++ {
			b := fmt.Sprintf("s%d", i)
			if !r1.has(b) && !r2.has(b) {
				return false
			}
		}
		return true
	}
	eventually(t, 40*time.Second, "200 messages consumed by the group", func() bool { return all(0, 200) })
	if r1.distinct() == 0 || r2.distinct() == 0 {
		t.Fatalf("one consumer got nothing: %d and %d", r1.distinct(), r2.distinct())
	}
	for b := range r1.msgs {
		if r2.has(b) {
			t.Errorf("%s consumed by both members", b)
		}
	}
	// One leaves: the other takes every queue.
	c1.Shutdown()
	time.Sleep(2 * time.Second)
	before := r2.distinct()
	send(200, 300)
	eventually(t, 40*time.Second, "the remaining consumer takes over every queue", func() bool {
		for i := 200; i < 300; i++ {
			if !r2.has(fmt.Sprintf("s%d", i)) {
				return false
			}
		}
		return true
	})
	if r2.distinct() < before+100 {
		t.Fatalf("survivor has %d, want %d", r2.distinct(), before+100)
	}
	c2.Shutdown()
}

func TestBroadcasting(t *testing.T) {
	g := startGroup(t)
	g.createTopic("it-bcast", 4)
	r1, r2 := newReceived(), newReceived()
	// Broadcasting consumers keep their offsets in local files named by
	// client id and group: a group of its own per run, so that an earlier
	// run's files do not apply.
	grp := fmt.Sprintf("it-bcast-cg-%d", time.Now().UnixNano())
	c1 := newPushConsumer(t, g, grp, "it-bcast", consumer.MessageSelector{}, r1, consumer.WithConsumerModel(consumer.BroadCasting))
	c2 := newPushConsumer(t, g, grp, "it-bcast", consumer.MessageSelector{}, r2, consumer.WithConsumerModel(consumer.BroadCasting))
	defer c1.Shutdown()
	defer c2.Shutdown()
	p := newProducer(t, g)
	for i := range 50 {
		if _, err := p.SendSync(context.Background(), primitive.NewMessage("it-bcast", []byte(fmt.Sprintf("b%d", i)))); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 40*time.Second, "each consumer gets all 50", func() bool { return r1.distinct() == 50 && r2.distinct() == 50 })
}

func TestTagAndSQL92Filters(t *testing.T) {
	g := startGroup(t)
	g.createTopic("it-filter", 2)
	p := newProducer(t, g)
	for i := range 30 {
		m := primitive.NewMessage("it-filter", []byte(fmt.Sprintf("f%d", i)))
		m.WithTag([]string{"red", "green", "blue"}[i%3])
		m.WithProperty("n", fmt.Sprint(i))
		if _, err := p.SendSync(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	rTag, rSQL := newReceived(), newReceived()
	ct := newPushConsumer(t, g, "it-filter-tag", "it-filter", consumer.MessageSelector{Type: consumer.TAG, Expression: "red || blue"}, rTag)
	cs := newPushConsumer(t, g, "it-filter-sql", "it-filter", consumer.MessageSelector{Type: consumer.SQL92, Expression: "n >= 10 AND TAGS = 'green'"}, rSQL)
	defer ct.Shutdown()
	defer cs.Shutdown()
	eventually(t, 40*time.Second, "tag consumer gets the 20 red and blue", func() bool { return rTag.distinct() == 20 })
	eventually(t, 40*time.Second, "SQL92 consumer gets the 7 green with n >= 10", func() bool { return rSQL.distinct() == 7 })
	time.Sleep(2 * time.Second) // nothing else trickles in
	for b, m := range rTag.msgs {
		if m.GetTags() == "green" {
			t.Errorf("tag filter delivered %s (green)", b)
		}
	}
	if n := rSQL.distinct(); n != 7 {
		t.Errorf("SQL92 consumer got %d messages, want 7", n)
	}
	for b, m := range rSQL.msgs {
		if m.GetTags() != "green" || m.GetProperty("n") < "1" {
			t.Errorf("SQL92 filter delivered %s (tags %s, n %s)", b, m.GetTags(), m.GetProperty("n"))
		}
	}
}

func TestConsumerResumesFromCommittedOffset(t *testing.T) {
	g := startGroup(t)
	g.createTopic("it-resume", 2)
	p := newProducer(t, g)
	send := func(from, to int) {
		for i := from; i < to; i++ {
			if _, err := p.SendSync(context.Background(), primitive.NewMessage("it-resume", []byte(fmt.Sprintf("r%d", i)))); err != nil {
				t.Fatal(err)
			}
		}
	}
	send(0, 40)
	r1 := newReceived()
	c1 := newPushConsumer(t, g, "it-resume-cg", "it-resume", consumer.MessageSelector{}, r1)
	eventually(t, 40*time.Second, "first run consumes 40", func() bool { return r1.distinct() == 40 })
	time.Sleep(6 * time.Second) // the client persists offsets every 5 s, and at shutdown
	c1.Shutdown()
	for q := range 2 {
		out, _ := g.raftmq("admin", "offset", "get", "--group", "it-resume-cg", "--topic", "it-resume", "--queue", fmt.Sprint(q), "--addr", strings.Join(g.addrs(), ","))
		t.Logf("after the first run: %s", strings.TrimSpace(out))
	}
	send(40, 60)
	r2 := newReceived()
	c2 := newPushConsumer(t, g, "it-resume-cg", "it-resume", consumer.MessageSelector{}, r2)
	defer c2.Shutdown()
	eventually(t, 40*time.Second, "second run consumes the 20 new", func() bool {
		for i := 40; i < 60; i++ {
			if !r2.has(fmt.Sprintf("r%d", i)) {
				return false
			}
		}
		return true
	})
	for i := range 40 {
		if r2.has(fmt.Sprintf("r%d", i)) {
			t.Fatalf("r%d, committed by the first run, was delivered again: the consumer did not resume from its offset", i)
		}
	}
}

func TestAdminClient(t *testing.T) {
	g := startGroup(t)
	a, err := admin.NewAdmin(admin.WithResolver(g.resolver()))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx := context.Background()
	leader := g.nodes[g.waitLeader(10*time.Second)-1].client
	if err := a.CreateTopic(ctx, admin.WithTopicCreate("it-admin"), admin.WithBrokerAddrCreate(leader)); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	list, err := a.FetchAllTopicList(ctx)
	if err != nil {
		t.Fatalf("FetchAllTopicList: %v", err)
	}
	if !slices.Contains(list.TopicList, "it-admin") {
		t.Fatalf("FetchAllTopicList: %v lacks it-admin", list.TopicList)
	}
	// A consumer group appears once its consumer heartbeats.
	r := newReceived()
	c := newPushConsumer(t, g, "it-admin-cg", "it-admin", consumer.MessageSelector{}, r)
	defer c.Shutdown()
	eventually(t, 10*time.Second, "GetAllSubscriptionGroup lists it-admin-cg", func() bool {
		w, err := a.GetAllSubscriptionGroup(ctx, leader, 3*time.Second)
		return err == nil && w.SubscriptionGroupTable["it-admin-cg"].GroupName == "it-admin-cg"
	})
	if err := a.DeleteTopic(ctx, admin.WithTopicDelete("it-admin")); err != nil {
		t.Fatalf("DeleteTopic: %v", err)
	}
	list, err = a.FetchAllTopicList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(list.TopicList, "it-admin") {
		t.Fatalf("DeleteTopic answered success but it-admin is still listed")
	}
}

func TestMessageQueryByKeyAndID(t *testing.T) {
	g := startGroup(t)
	g.createTopic("it-query", 2)
	p := newProducer(t, g)
	m := primitive.NewMessage("it-query", []byte("find me"))
	m.WithKeys([]string{"order-77"})
	res, err := p.SendSync(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	addr := strings.Join(g.addrs(), ",")
	for _, args := range [][]string{
		{"--topic", "it-query", "--key", "order-77"},
		{"--topic", "it-query", "--uniq", res.MsgID},
		{"--id", res.OffsetMsgID},
	} {
		out, err := g.raftmq(append([]string{"admin", "message", "query", "--addr", addr}, args...)...)
		if err != nil || !strings.Contains(out, `"find me"`) || !strings.Contains(out, "KEYS=order-77") {
			t.Errorf("query %v: %v\n%s", args, err, out)
		}
	}
}

// TestSendSyncThroughLeaderKills sends with SendSync and the client's
// default retries while the leader is killed with SIGKILL and restarted,
// three times; no send may fail and every acknowledged message must be
// consumed afterwards.
func TestSendSyncThroughLeaderKills(t *testing.T) {
	g := startGroup(t)
	g.createTopic("it-failover", 4)
	p := newProducer(t, g)
	var (
		mu     sync.Mutex
		acked  []string
		failed []string
	)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			body := fmt.Sprintf("k%d", i)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := p.SendSync(ctx, primitive.NewMessage("it-failover", []byte(body)))
			cancel()
			mu.Lock()
			if err != nil {
				failed = append(failed, fmt.Sprintf("%s: %v", body, err))
			} else {
				acked = append(acked, body)
			}
			mu.Unlock()
		}
	}()
	kills := 3
	if testing.Short() {
		kills = 1
	}
	for range kills {
		time.Sleep(2 * time.Second)
		l := g.waitLeader(20 * time.Second)
		g.kill(l)
		time.Sleep(3 * time.Second)
		g.start(l)
	}
	time.Sleep(3 * time.Second)
	close(stop)
	<-done
	mu.Lock()
	t.Logf("%d sends acknowledged, %d failed across %d leader kills", len(acked), len(failed), kills)
	if len(failed) > 0 {
		t.Errorf("%d sends failed, want 0; first: %s", len(failed), failed[0])
	}
	want := slices.Clone(acked)
	mu.Unlock()

	r := newReceived()
	c := newPushConsumer(t, g, "it-failover-cg", "it-failover", consumer.MessageSelector{}, r)
	defer c.Shutdown()
	eventually(t, 60*time.Second, "every acknowledged send consumed", func() bool {
		for _, b := range want {
			if !r.has(b) {
				return false
			}
		}
		return true
	})
}

// TestOrderlyPerKeyAcrossLeaderKill sends per-key sequences through a
// hash selector while the leader is killed once, and checks that an
// orderly consumer sees every key's acknowledged messages in send order.
func TestOrderlyPerKeyAcrossLeaderKill(t *testing.T) {
	g := startGroup(t)
	g.createTopic("it-order", 4)
	p := newProducer(t, g, producer.WithQueueSelector(producer.NewHashQueueSelector()))
	r := newReceived()
	c := newPushConsumer(t, g, "it-order-cg", "it-order", consumer.MessageSelector{}, r, consumer.WithConsumerOrder(true))
	defer c.Shutdown()
	const keys = 8
	acked := map[string][]int{}
	var mu sync.Mutex
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			key := fmt.Sprintf("key%d", i%keys)
			m := primitive.NewMessage("it-order", []byte(fmt.Sprintf("%s:%d", key, i)))
			m.WithShardingKey(key)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := p.SendSync(ctx, m)
			cancel()
			if err == nil {
				mu.Lock()
				acked[key] = append(acked[key], i)
				mu.Unlock()
			}
		}
	}()
	time.Sleep(2 * time.Second)
	l := g.waitLeader(20 * time.Second)
	g.kill(l)
	time.Sleep(3 * time.Second)
	g.start(l)
	time.Sleep(2 * time.Second)
	close(stop)
	<-done
	mu.Lock()
	defer mu.Unlock()
	eventually(t, 60*time.Second, "every acknowledged message consumed", func() bool {
		for k, seqs := range acked {
			for _, i := range seqs {
				if !r.has(fmt.Sprintf("%s:%d", k, i)) {
					return false
				}
			}
		}
		return true
	})
	// First deliveries per key, in delivery order, must follow send order.
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{}
	perKey := map[string][]int{}
	for _, b := range r.order {
		if seen[b] {
			continue
		}
		seen[b] = true
		k, n, _ := strings.Cut(b, ":")
		var i int
		fmt.Sscan(n, &i)
		perKey[k] = append(perKey[k], i)
	}
	for k, got := range perKey {
		if !sort.IntsAreSorted(got) {
			t.Errorf("%s delivered out of order: %v", k, got)
		}
	}
}
