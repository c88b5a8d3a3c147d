package interop

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// sender sends with SendSync from a few goroutines until stopped and
// records what was acknowledged and what failed.
type sender struct {
	start  time.Time
	mu     sync.Mutex
	acked  []string
	failed []string
	slow   time.Duration // the longest acknowledged SendSync
	slowAt time.Duration // when it started, since start
	stop   chan struct{}
	done   sync.WaitGroup
}

// startSender runs workers goroutines; worker w's i-th message is next(w, i).
func startSender(t *testing.T, p rocketmq.Producer, workers int, next func(w, i int) *primitive.Message) *sender {
	s := &sender{start: time.Now(), stop: make(chan struct{})}
	for w := range workers {
		s.done.Add(1)
		go func() {
			defer s.done.Done()
			for i := 0; ; i++ {
				select {
				case <-s.stop:
					return
				default:
				}
				m := next(w, i)
				// The client's own bounds are 3 s an attempt and 3 attempts;
				// this one only keeps a hung send from hanging the test.
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				began := time.Now()
				res, err := p.SendSync(ctx, m)
				took := time.Since(began)
				cancel()
				s.mu.Lock()
				if err == nil && res.Status == primitive.SendOK {
					s.acked = append(s.acked, string(m.Body))
					if took > s.slow {
						s.slow, s.slowAt = took, began.Sub(s.start)
					}
				} else {
					s.failed = append(s.failed, fmt.Sprintf("%s at +%v: %v", m.Body, time.Since(s.start).Round(time.Millisecond), err))
				}
				s.mu.Unlock()
				if err != nil {
					time.Sleep(10 * time.Millisecond) // no tight loop against a dead node
				}
			}
		}()
	}
	t.Cleanup(s.finish)
	return s
}

func (s *sender) ackCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.acked)
}

// waitProgress waits until n more sends were acknowledged.
func (s *sender) waitProgress(t *testing.T, n int, timeout time.Duration, what string) {
	t.Helper()
	base := s.ackCount()
	if err := poll(timeout, func() bool { return s.ackCount() >= base+n }); err != nil {
		s.mu.Lock()
		last := s.failed[max(0, len(s.failed)-3):]
		s.mu.Unlock()
		t.Fatalf("%s: %d sends acknowledged in %v, want %d; last failures: %v", what, s.ackCount()-base, timeout, n, last)
	}
}

// finish stops the senders and waits for their last sends.
func (s *sender) finish() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	s.done.Wait()
}

func (s *sender) results() (acked, failed []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.acked), slices.Clone(s.failed)
}

// timeline records the faults a test injected, for its failure messages.
type timeline struct {
	start  time.Time
	events []string
}

func (tl *timeline) add(format string, args ...any) {
	tl.events = append(tl.events, fmt.Sprintf("+%v ", time.Since(tl.start).Round(time.Millisecond))+fmt.Sprintf(format, args...))
}

func (tl *timeline) String() string { return strings.Join(tl.events, "; ") }

// killLeader kill -9s the ready leader, waits for another node to lead,
// lets the sender make progress with the node down, restarts it and waits
// until it caught up and the sender made progress again.
func killLeader(t *testing.T, g *group, s *sender, tl *timeline, downWait time.Duration) {
	t.Helper()
	l := g.waitLeader(20 * time.Second)
	g.kill(l)
	tl.add("killed leader %d", l)
	nl := g.waitNewLeader(l, 20*time.Second)
	tl.add("node %d leads", nl)
	s.waitProgress(t, 100, downWait, fmt.Sprintf("sends with node %d killed", l))
	tl.add("100 more sends acknowledged")
	g.start(l)
	tl.add("restarted node %d", l)
	g.waitCaughtUp(l, 30*time.Second)
	tl.add("node %d caught up", l)
	s.waitProgress(t, 100, 30*time.Second, fmt.Sprintf("sends after node %d rejoined", l))
}

// TestSendSyncThroughLeaderKills sends with SendSync and the client's
// default retries (3 attempts, each on another broker name) while the
// leader is killed with SIGKILL and restarted, three times (once with
// -short). No send may fail, and every acknowledged message must be
// consumed afterwards.
func TestSendSyncThroughLeaderKills(t *testing.T) {
	g := startGroup(t)
	g.diagnose(t, g.mark())
	topic := uniq("failover")
	g.createTopic(t, topic, 4)
	p := newProducer(t, g)
	s := startSender(t, p, 2, func(w, i int) *primitive.Message {
		return message(topic, fmt.Sprintf("w%d-%d", w, i))
	})
	tl := &timeline{start: s.start}
	s.waitProgress(t, 100, 30*time.Second, "sends before the first kill")
	kills := 3
	if testing.Short() {
		kills = 1
	}
	for range kills {
		killLeader(t, g, s, tl, 30*time.Second)
	}
	s.finish()
	acked, failed := s.results()
	t.Logf("%d sends acknowledged, %d failed; the slowest acknowledged send took %v (from +%v); %s", len(acked), len(failed),
		s.slow.Round(time.Millisecond), s.slowAt.Round(time.Millisecond), tl)
	if len(failed) > 0 {
		t.Errorf("%d sends failed, want 0; first: %v", len(failed), failed[:min(len(failed), 5)])
	}

	box := newInbox()
	startConsumer(t, g, "c", uniq("cg"), topic, consumer.MessageSelector{}, box)
	box.waitAll(t, 60*time.Second, "every acknowledged send consumed after the kills", acked)
	dups := 0
	for _, b := range acked {
		if n := len(box.deliveries(b)); n > 1 {
			dups++
		}
	}
	t.Logf("%d acknowledged messages stored more than once (a retried send whose first attempt was stored)", dups)
}

// TestOrderlyAcrossLeaderKill sends eight keys' sequences with a hash
// queue selector on the sharding key, one send at a time, to an orderly
// push consumer, and kills the leader with SIGKILL mid-stream (then
// restarts it). Every acknowledged message must be consumed, and each
// key's acknowledged messages must be first delivered in send order
// (redeliveries, which RocketMQ allows, are ignored).
func TestOrderlyAcrossLeaderKill(t *testing.T) {
	g := startGroup(t)
	g.diagnose(t, g.mark())
	topic := uniq("order")
	g.createTopic(t, topic, 4)
	box := newInbox()
	startConsumer(t, g, "c", uniq("cg"), topic, consumer.MessageSelector{}, box, consumer.WithConsumerOrder(true))
	p := newProducer(t, g, producer.WithQueueSelector(producer.NewHashQueueSelector()))
	s := startKeyedSender(t, p, topic)
	tl := &timeline{start: s.start}
	s.waitProgress(t, 100, 30*time.Second, "sends before the kill")
	// A hash-selected send cannot move to another broker name: sends of
	// the keys that hash to the dead leader's broker name fail until the
	// client refreshes its route (every 30 s), so give the others time.
	killLeader(t, g, s, tl, 60*time.Second)
	s.finish()
	acked, failed := s.results()
	t.Logf("%d sends acknowledged, %d failed (allowed here); %s", len(acked), len(failed), tl)
	box.waitAll(t, 60*time.Second, "every acknowledged message consumed", acked)

	checkKeyOrder(t, box, acked)
}

// startKeyedSender sends eight keys' sequences ("keyK:i" bodies, sharding
// key keyK) one send at a time, so each key's sends are in order.
func startKeyedSender(t *testing.T, p rocketmq.Producer, topic string) *sender {
	const keys = 8
	return startSender(t, p, 1, func(_, i int) *primitive.Message {
		key := fmt.Sprintf("key%d", i%keys)
		m := message(topic, fmt.Sprintf("%s:%d", key, i))
		m.WithShardingKey(key)
		return m
	})
}

// checkKeyOrder checks that every acknowledged message of each key
// ("key:i" bodies) was first delivered in send order; later deliveries of
// a message (redeliveries) are ignored.
func checkKeyOrder(t *testing.T, box *inbox, acked []string) {
	t.Helper()
	ackedSet := map[string]bool{}
	want := map[string][]int{}
	for _, b := range acked {
		ackedSet[b] = true
		k, n, _ := strings.Cut(b, ":")
		i, _ := strconv.Atoi(n)
		want[k] = append(want[k], i)
	}
	first := map[string][]int{}
	queues := map[string]map[int]bool{}
	seen := map[string]bool{}
	redelivered, unacked := 0, 0
	for _, d := range box.snapshot() {
		b := d.body()
		if seen[b] {
			redelivered++
			continue
		}
		seen[b] = true
		if !ackedSet[b] {
			unacked++ // a failed send that was stored after all
			continue
		}
		k, n, _ := strings.Cut(b, ":")
		i, _ := strconv.Atoi(n)
		first[k] = append(first[k], i)
		if queues[k] == nil {
			queues[k] = map[int]bool{}
		}
		queues[k][d.msg.Queue.QueueId] = true
	}
	t.Logf("%d redeliveries, %d delivered messages whose send had failed", redelivered, unacked)
	for _, k := range sortedKeys(want) {
		if !slices.Equal(first[k], want[k]) {
			t.Errorf("%s (stored in queues %v): %s", k, sortedInts(queues[k]), orderDiff(first[k], want[k]))
		}
	}
}

// orderDiff describes where the delivered sequence got leaves the sent one.
func orderDiff(got, want []int) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	from := max(0, i-3)
	return fmt.Sprintf("%d acknowledged sends, %d first deliveries; from position %d delivered %v, sent %v",
		len(want), len(got), i, got[from:min(len(got), i+6)], want[from:min(len(want), i+6)])
}
