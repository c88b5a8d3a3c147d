package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/harness/localgroup"
	"github.com/raftmq/raftmq/offsets"
)

// TestSimpleConsumersAgainstProcesses runs three raftmq broker processes
// and SimpleConsumers of one group: acks go through a follower, a message
// held by one consumer is not handed to another within its invisible
// time, an expired message comes back with attempt 2, and after the
// leader is killed with SIGKILL mid-flight every message is still
// consumed and no acked message is delivered again.
func TestSimpleConsumersAgainstProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds raftmq and starts processes")
	}
	g := localgroup.New(localgroup.Config{Binary: buildRaftmq(t), Dir: t.TempDir(), BasePort: freeBasePort(t), Nodes: 3})
	require.NoError(t, g.Start())
	t.Cleanup(func() { _ = g.StopAll() })
	leader, err := g.WaitLeader(30 * time.Second)
	require.NoError(t, err)
	follower := uint64(1 + leader%3)

	c := newClient(t, g.Addrs())
	createTopic(t, c, "T", 2)
	gc, err := json.Marshal(offsets.NewSubscriptionGroupConfig("PG"))
	require.NoError(t, err)
	require.NoError(t, c.UpdateGroup(ctxFor(t, 5*time.Second), gc))
	const total = 40
	p := c.NewProducer(client.ProducerOptions{})
	for i := range total {
		_, err := p.Send(ctxFor(t, 5*time.Second), &client.Message{Topic: "T", QueueID: int32(i % 2), Body: fmt.Appendf(nil, "m-%d", i)})
		require.NoError(t, err)
	}

	opts := client.SimpleConsumerOptions{Await: 500 * time.Millisecond}
	a := c.NewSimpleConsumer("PG", "T", opts)
	require.NoError(t, a.Start(ctxFor(t, 5*time.Second)))
	b := newClient(t, g.Addrs()).NewSimpleConsumer("PG", "T", opts)
	// A client that knows only the follower: its acks are forwarded.
	viaFollower := newClient(t, []string{g.Node(follower).Client}).NewSimpleConsumer("PG", "T", opts)

	acked := map[string]bool{}
	held, err := a.Receive(ctxFor(t, 10*time.Second), 10, 30*time.Second)
	require.NoError(t, err)
	require.Len(t, held, 10)
	heldBodies := map[string]bool{}
	for _, m := range held {
		require.EqualValues(t, 1, m.Attempt)
		heldBodies[string(m.Body)] = true
	}
	for _, m := range held[:5] {
		require.NoError(t, viaFollower.Ack(ctxFor(t, 5*time.Second), m))
		acked[string(m.Body)] = true
	}
	require.NoError(t, viaFollower.Ack(ctxFor(t, 5*time.Second), held[0]), "a second ack is not an error")

	// b gets everything else, none of what a holds.
	var rest []*client.ReceivedMessage
	for len(rest) < total-10 {
		ms, err := b.Receive(ctxFor(t, 10*time.Second), 32, 30*time.Second)
		require.NoError(t, err)
		require.NotEmpty(t, ms, "messages left: %d", total-10-len(rest))
		rest = append(rest, ms...)
	}
	for _, m := range rest {
		require.False(t, heldBodies[string(m.Body)], "%s handed to b while a holds it", m.Body)
	}
	ms, err := b.Receive(ctxFor(t, 10*time.Second), 32, 30*time.Second)
	require.NoError(t, err)
	require.Empty(t, ms)

	// Expiry: a's unacked five come back after a short invisible time.
	for _, m := range held[5:] {
		require.NoError(t, a.ChangeInvisibleDuration(ctxFor(t, 5*time.Second), m, 300*time.Millisecond))
	}
	var back []*client.ReceivedMessage
	require.Eventually(t, func() bool {
		ms, err := b.Receive(ctxFor(t, 10*time.Second), 32, 30*time.Second)
		require.NoError(t, err)
		back = append(back, ms...)
		return len(back) >= 5
	}, 20*time.Second, 10*time.Millisecond)
	require.Len(t, back, 5)
	for _, m := range back {
		require.EqualValues(t, 2, m.Attempt, "%s", m.Body)
		require.True(t, heldBodies[string(m.Body)])
	}
	// a's receipt of a redelivered message no longer acks it.
	err = a.Ack(ctxFor(t, 5*time.Second), held[5])
	require.ErrorIs(t, err, client.ErrReceiptExpired)
	// A batch ack answers for each receipt: the expired one fails, the
	// one acked before is acked again (no error).
	errs := a.AckBatch(ctxFor(t, 10*time.Second), []*client.ReceivedMessage{held[1], held[6]})
	require.Len(t, errs, 2)
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], client.ErrReceiptExpired)

	// Ack half of what is out; kill the leader with the rest in flight
	// (invisible 2 s); after the failover everything is consumed and
	// nothing acked comes again.
	inFlight := append(rest, back...)
	var even []*client.ReceivedMessage
	for i, m := range inFlight {
		if i%2 == 0 {
			even = append(even, m)
			acked[string(m.Body)] = true
		} else {
			require.NoError(t, b.ChangeInvisibleDuration(ctxFor(t, 5*time.Second), m, 2*time.Second))
		}
	}
	for i, err := range b.AckBatch(ctxFor(t, 10*time.Second), even) {
		require.NoError(t, err, "%s", even[i].Body)
	}
	old := g.Leader()
	require.NotZero(t, old)
	require.NoError(t, g.Kill(old))
	t.Logf("killed leader %d with %d messages in flight", old, len(inFlight)-len(inFlight)/2)
	_, err = g.WaitLeader(30 * time.Second)
	require.NoError(t, err)
	// done: acked, or acked with an unknown outcome (it may come again).
	done := map[string]bool{}
	for body := range acked {
		done[body] = true
	}
	deadline := time.Now().Add(60 * time.Second)
	for len(done) < total && time.Now().Before(deadline) {
		ms, err := b.Receive(ctxFor(t, 10*time.Second), 32, 30*time.Second)
		if err != nil {
			t.Logf("receive during failover: %v", err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for _, m := range ms {
			require.False(t, acked[string(m.Body)], "%s delivered again after its ack", m.Body)
			err := b.Ack(ctxFor(t, 5*time.Second), m)
			switch {
			case err == nil:
				acked[string(m.Body)], done[string(m.Body)] = true, true
			case errors.Is(err, client.ErrIndeterminate):
				done[string(m.Body)] = true
				t.Logf("ack during failover: %v", err)
			default:
				t.Logf("ack during failover: %v", err)
			}
		}
	}
	require.Len(t, done, total, "every message consumed")
	require.NoError(t, g.StartNode(old))
}

// BenchmarkPopAck measures pop consumption on an in-process group: 4
// SimpleConsumers receive up to 32 messages at a time and ack each one
// (acks of one batch in parallel), next to one pull reader of the same
// messages. It reports pop+ack and pull messages/s and the ack latency.
//
//	go test ./client/e2e -run '^$' -bench BenchmarkPopAck -benchtime 4000x
func BenchmarkPopAck(b *testing.B) {
	addrs := startGroup(b)
	c := newClient(b, addrs)
	createTopic(b, c, "PB", 4)
	gc, err := json.Marshal(offsets.NewSubscriptionGroupConfig("PBG"))
	require.NoError(b, err)
	require.NoError(b, c.UpdateGroup(ctxFor(b, 5*time.Second), gc))
	p := c.NewProducer(client.ProducerOptions{})
	body := make([]byte, 256)
	for i := 0; i < b.N; i += 32 {
		var ms []*client.Message
		for j := 0; j < 32 && i+j < b.N; j++ {
			ms = append(ms, &client.Message{Topic: "PB", QueueID: int32(i / 32 % 4), Body: body})
		}
		_, err := p.SendBatch(ctxFor(b, 10*time.Second), ms)
		require.NoError(b, err)
	}
	// Pull, for comparison: every queue from 0.
	pc := c.NewPullConsumer("PBPULL")
	start := time.Now()
	pulled := 0
	for q := int32(0); q < 4; q++ {
		for off := int64(0); ; {
			pr, err := pc.Pull(ctxFor(b, 10*time.Second), "PB", q, off, 32, 0)
			require.NoError(b, err)
			if len(pr.Messages) == 0 {
				break
			}
			pulled += len(pr.Messages)
			off = pr.NextBeginOffset
		}
	}
	pullRate := float64(pulled) / time.Since(start).Seconds()

	b.ResetTimer()
	start = time.Now()
	var mu sync.Mutex
	var lat []time.Duration
	done := 0
	var wg sync.WaitGroup
	for range 4 {
		sc := newClient(b, addrs).NewSimpleConsumer("PBG", "PB", client.SimpleConsumerOptions{Await: -1})
		wg.Go(func() {
			for {
				mu.Lock()
				finished := done >= b.N
				mu.Unlock()
				if finished {
					return
				}
				ms, err := sc.Receive(ctxFor(b, 10*time.Second), 32, 30*time.Second)
				if err != nil {
					b.Error(err)
					return
				}
				if len(ms) == 0 {
					time.Sleep(time.Millisecond)
					continue
				}
				var awg sync.WaitGroup
				for _, m := range ms {
					awg.Go(func() {
						t0 := time.Now()
						if err := sc.Ack(ctxFor(b, 10*time.Second), m); err != nil {
							b.Error(err)
						}
						d := time.Since(t0)
						mu.Lock()
						lat = append(lat, d)
						done++
						mu.Unlock()
					})
				}
				awg.Wait()
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(done)/el.Seconds(), "pop+ack-msgs/s")
		b.ReportMetric(pullRate, "pull-msgs/s")
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "ack-p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "ack-p99-ms")
	}
}
