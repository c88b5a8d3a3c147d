// Package e2e tests the client against real raftmq brokers: three nodes of
// package cluster in this process, with raft over loopback TCP. It is a
// package of its own so that `go test ./client` does not build the broker.
package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/harness/testgroup"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// startGroup starts a three-node group in this process and returns its
// client addresses.
func startGroup(t testing.TB) []string { return testgroup.Start(t) }

func newClient(t testing.TB, addrs []string) *client.Client {
	t.Helper()
	c, err := client.New(client.Options{Addrs: addrs, RequestTimeout: 2 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// createTopic creates topic once the group has elected a leader.
func createTopic(t testing.TB, c *client.Client, topic string, queues int) {
	t.Helper()
	require.Eventually(t, func() bool { return c.CreateTopic(ctxFor(t, 2*time.Second), topic, queues) == nil },
		10*time.Second, 20*time.Millisecond)
}

// produce sends n messages to each queue of topic, bodies "<queue>-<i>".
func produce(t *testing.T, c *client.Client, topic string, queues, first, n int) {
	t.Helper()
	p := c.NewProducer(client.ProducerOptions{})
	for q := range queues {
		for i := first; i < first+n; i++ {
			_, err := p.Send(ctxFor(t, 5*time.Second), &client.Message{Topic: topic, QueueID: int32(q), Body: fmt.Appendf(nil, "%d-%d", q, i)})
			require.NoError(t, err)
		}
	}
}

func options(group, topic string) client.PushConsumerOptions {
	return client.PushConsumerOptions{
		Group:             group,
		Subscriptions:     map[string]client.Subscription{topic: {}},
		ConsumeFrom:       client.ConsumeFromFirstOffset,
		RebalanceInterval: time.Hour, // only the brokers' notifications rebalance
		PersistInterval:   50 * time.Millisecond,
		LockInterval:      200 * time.Millisecond,
		SuspendDelay:      10 * time.Millisecond,
		LongPoll:          500 * time.Millisecond,
	}
}

func start(t *testing.T, addrs []string, o client.PushConsumerOptions, fn client.ConsumeFunc) *client.PushConsumer {
	t.Helper()
	p, err := newClient(t, addrs).NewPushConsumer(o, fn)
	require.NoError(t, err)
	require.NoError(t, p.Start(ctxFor(t, 10*time.Second)))
	return p
}

func queues(topic string, n int) []client.MessageQueue {
	out := make([]client.MessageQueue, n)
	for i := range out {
		out[i] = client.MessageQueue{Topic: topic, BrokerName: "raftmq", QueueID: int32(i)}
	}
	return out
}

func cover(want []client.MessageQueue, ps ...*client.PushConsumer) bool {
	var got []client.MessageQueue
	for _, p := range ps {
		if len(p.Assignment()) == 0 {
			return false
		}
		got = append(got, p.Assignment()...)
	}
	slices.SortFunc(got, client.CompareQueues)
	return slices.Equal(got, want)
}

// TestClusteringAgainstBrokers: two concurrent consumers of a group split
// a topic and the group's retry topic between them through the brokers'
// heartbeat registry, member list and notifications alone; every message
// is consumed and the offsets reach the brokers; when one leaves, the other
// takes its queues.
func TestClusteringAgainstBrokers(t *testing.T) {
	addrs := startGroup(t)
	c := newClient(t, addrs)
	createTopic(t, c, "T", 4)
	produce(t, c, "T", 4, 0, 10)

	var mu sync.Mutex
	seen := map[string]int{}
	fn := func(_ context.Context, ms []*client.MessageExt) client.ConsumeResult {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range ms {
			seen[string(m.Body)]++
		}
		return client.ConsumeSuccess
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(seen)
	}
	o := options("G", "T")
	a := start(t, addrs, o, fn)
	b := start(t, addrs, o, fn)
	want := append(queues("%RETRY%G", 1), queues("T", 4)...)
	require.Eventually(t, func() bool { return cover(want, a, b) }, 10*time.Second, 10*time.Millisecond,
		"a %v, b %v", a.Assignment(), b.Assignment())
	require.Eventually(t, func() bool { return count() == 40 }, 10*time.Second, 10*time.Millisecond)
	pc := c.NewPullConsumer("G")
	require.Eventually(t, func() bool {
		for q := range int32(4) {
			if off, ok, err := pc.FetchOffset(ctxFor(t, time.Second), "T", q); err != nil || !ok || off != 10 {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond, "committed offsets reach the brokers")

	require.NoError(t, b.Shutdown(ctxFor(t, 10*time.Second)))
	require.Eventually(t, func() bool { return cover(want, a) }, 10*time.Second, 10*time.Millisecond, "a %v", a.Assignment())
	produce(t, c, "T", 4, 10, 2)
	require.Eventually(t, func() bool { return count() == 48 }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, a.Shutdown(ctxFor(t, 10*time.Second)))
}

// TestOrderlyHandoverAgainstBrokers: an orderly consumer owns every queue
// and is part way through when a second joins; the queues it gives up are
// persisted and unlocked before the newcomer locks them and resumes from
// the committed offset, so each queue is consumed exactly once, in order,
// across the handover.
func TestOrderlyHandoverAgainstBrokers(t *testing.T) {
	addrs := startGroup(t)
	c := newClient(t, addrs)
	createTopic(t, c, "O", 2)
	const n = 30
	produce(t, c, "O", 2, 0, n)

	var mu sync.Mutex
	got := map[int32][]int64{}
	owners := map[int32]map[string]bool{}
	var ids []*client.PushConsumer
	fn := func(who int) client.ConsumeFunc {
		return func(_ context.Context, ms []*client.MessageExt) client.ConsumeResult {
			time.Sleep(3 * time.Millisecond)
			mu.Lock()
			defer mu.Unlock()
			for _, m := range ms {
				got[m.QueueID] = append(got[m.QueueID], m.QueueOffset)
				if owners[m.QueueID] == nil {
					owners[m.QueueID] = map[string]bool{}
				}
				owners[m.QueueID][fmt.Sprint(who)] = true
			}
			return client.ConsumeSuccess
		}
	}
	progress := func() int {
		mu.Lock()
		defer mu.Unlock()
		return min(len(got[0]), len(got[1]))
	}
	o := options("OG", "O")
	o.Orderly = true
	a := start(t, addrs, o, fn(0))
	ids = append(ids, a)
	require.Eventually(t, func() bool { return progress() >= 5 }, 10*time.Second, time.Millisecond)
	b := start(t, addrs, o, fn(1))
	ids = append(ids, b)
	want := append(queues("%RETRY%OG", 1), queues("O", 2)...)
	require.Eventually(t, func() bool { return cover(want, a, b) }, 10*time.Second, 10*time.Millisecond,
		"a %v, b %v", a.Assignment(), b.Assignment())
	require.Eventually(t, func() bool { return progress() >= n }, 10*time.Second, 10*time.Millisecond)
	time.Sleep(200 * time.Millisecond) // room for a duplicate to show
	mu.Lock()
	for q := range int32(2) {
		wantOffs := make([]int64, n)
		for i := range wantOffs {
			wantOffs[i] = int64(i)
		}
		require.Equal(t, wantOffs, got[q], "queue %d: each message once, in order", q)
	}
	handedOver := len(owners[0]) == 2 || len(owners[1]) == 2
	mu.Unlock()
	require.True(t, handedOver, "one queue moved from a to b mid-way")
	for _, p := range ids {
		require.NoError(t, p.Shutdown(ctxFor(t, 10*time.Second)))
	}
}

// TestResetByTimeRestartsLiveConsumer: an operator resets a group's offsets
// by time while its push consumer runs; the broker tells the consumer
// (RESET_CONSUMER_CLIENT_OFFSET), which restarts its queues at the reset
// offsets at once: it consumes again the messages stored after the time,
// none of the older ones, and its commits do not undo the reset.
func TestResetByTimeRestartsLiveConsumer(t *testing.T) {
	addrs := startGroup(t)
	c := newClient(t, addrs)
	createTopic(t, c, "R", 2)
	produce(t, c, "R", 2, 0, 5) // old: "<q>-0" .. "<q>-4"
	time.Sleep(50 * time.Millisecond)
	mid := time.Now()
	time.Sleep(50 * time.Millisecond)
	produce(t, c, "R", 2, 5, 3) // new: "<q>-5" .. "<q>-7"

	var mu sync.Mutex
	seen := map[string]int{}
	fn := func(_ context.Context, ms []*client.MessageExt) client.ConsumeResult {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range ms {
			seen[string(m.Body)]++
		}
		return client.ConsumeSuccess
	}
	times := func(body string) int {
		mu.Lock()
		defer mu.Unlock()
		return seen[body]
	}
	p := start(t, addrs, options("RG", "R"), fn)
	defer func() { require.NoError(t, p.Shutdown(ctxFor(t, 10*time.Second))) }()
	pc := c.NewPullConsumer("RG")
	committed := func(want int64) bool {
		for q := range int32(2) {
			if off, ok, err := pc.FetchOffset(ctxFor(t, time.Second), "R", q); err != nil || !ok || off != want {
				return false
			}
		}
		return true
	}
	require.Eventually(t, func() bool { return committed(8) }, 10*time.Second, 20*time.Millisecond, "everything consumed and committed")

	h := remoting.ResetOffsetRequestHeader{Topic: "R", Group: "RG", Timestamp: mid.UnixMilli(), IsForce: true}
	_, err := c.AdminChange(ctxFor(t, 5*time.Second), remoting.InvokeBrokerToResetOffset, h.Encode(), nil, true)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		for q := range 2 {
			for i := 5; i < 8; i++ {
				if times(fmt.Sprintf("%d-%d", q, i)) < 2 {
					return false
				}
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond, "the live consumer consumes again what was stored after the reset time")
	for q := range 2 {
		for i := range 5 {
			require.Equal(t, 1, times(fmt.Sprintf("%d-%d", q, i)), "a message stored before the reset time came again")
		}
	}
	require.Eventually(t, func() bool { return committed(8) }, 10*time.Second, 20*time.Millisecond, "the consumer commits its new progress")
}
