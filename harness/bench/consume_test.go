package bench

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/harness/testgroup"
)

// The seen set counts each offset of the ranges once, tells duplicates
// and offsets outside the ranges apart, finds what is missing, and is
// done exactly when every offset was seen.
func TestBenchSeenSet(t *testing.T) {
	s, err := newSeenSet([]queueRange{{Queue: 0, Lo: 10, Hi: 80}, {Queue: 2, Lo: 5, Hi: 5}, {Queue: 3, Lo: 0, Hi: 3}})
	require.NoError(t, err)
	require.Equal(t, int64(73), s.total)
	n, q, off := s.missing()
	require.Equal(t, int64(73), n)
	require.Equal(t, int32(0), q)
	require.Equal(t, int64(10), off)

	for _, c := range []struct {
		q           int32
		off         int64
		first, inRg bool
	}{
		{0, 9, false, false},  // below the range
		{0, 80, false, false}, // its end is exclusive
		{1, 0, false, false},  // a queue outside the run
		{2, 5, false, false},  // an empty range
		{7, 0, false, false},  // past every queue
		{-1, 0, false, false}, // nonsense
		{0, 10, true, true},
		{0, 10, false, true}, // again: a duplicate
		{0, 79, true, true},
		{3, 2, true, true},
	} {
		first, in := s.mark(c.q, c.off)
		require.Equal(t, c.first, first, "mark(%d, %d) first", c.q, c.off)
		require.Equal(t, c.inRg, in, "mark(%d, %d) in range", c.q, c.off)
	}
	s.count(3, 1)
	n, q, off = s.missing()
	require.Equal(t, int64(70), n)
	require.Equal(t, int32(0), q)
	require.Equal(t, int64(11), off)

	// Everything else, from many goroutines at once, each offset twice.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			var fresh, dups int64
			for _, r := range []queueRange{{0, 10, 80}, {3, 0, 3}} {
				for o := r.Lo; o < r.Hi; o++ {
					if first, in := s.mark(r.Queue, o); first {
						fresh++
					} else if in {
						dups++
					}
				}
			}
			s.count(fresh, dups)
		})
	}
	wg.Wait()
	select {
	case <-s.done:
	default:
		t.Fatal("not done with every offset seen")
	}
	require.Equal(t, int64(73), s.distinct.Load())
	require.Equal(t, int64(1+4*73-70), s.dups.Load(), "every delivery but the first of each offset")
	n, q, off = s.missing()
	require.Equal(t, int64(0), n)
	require.Equal(t, int32(-1), q)
	require.Equal(t, int64(-1), off)

	empty, err := newSeenSet([]queueRange{{Queue: 0, Lo: 4, Hi: 4}})
	require.NoError(t, err)
	<-empty.done // nothing to consume: done at once

	_, err = newSeenSet([]queueRange{{Queue: 1, Lo: 0, Hi: 4}, {Queue: 1, Lo: 4, Hi: 8}})
	require.ErrorContains(t, err, "twice")
	_, err = newSeenSet([]queueRange{{Queue: -2, Lo: 0, Hi: 4}})
	require.ErrorContains(t, err, "negative")
}

// take counts a batch's first deliveries, their bytes and its duplicates,
// each topic's queues apart; other topics and queues do not count.
func TestBenchConsumeRunTake(t *testing.T) {
	spans := []topicSpan{{name: "a", base: 0, queues: 2}, {name: "b", base: 2, queues: 1}}
	run, err := newConsumeRun(spans, []queueRange{{Queue: 0, Lo: 0, Hi: 3}, {Queue: 1, Lo: 0, Hi: 2}, {Queue: 2, Lo: 4, Hi: 5}})
	require.NoError(t, err)
	msg := func(topic string, q int32, off int64, size int) *client.MessageExt {
		return &client.MessageExt{Topic: topic, QueueID: q, QueueOffset: off, Body: make([]byte, size)}
	}
	require.Equal(t, int64(3), run.take([]*client.MessageExt{msg("a", 0, 0, 10), msg("a", 0, 1, 10), msg("a", 1, 0, 5), msg("a", 1, 5, 7)}))
	require.Equal(t, int64(1), run.take([]*client.MessageExt{msg("a", 0, 1, 10), msg("a", 0, 2, 10)}))
	// Queue 0 of b is the run's queue 2, not a's; b has no queue 1, c
	// is no topic of the run.
	require.Zero(t, run.take([]*client.MessageExt{msg("b", 0, 0, 9), msg("b", 1, 4, 9), msg("c", 0, 4, 9), msg("", 0, 4, 9)}))
	require.Equal(t, int64(1), run.take([]*client.MessageExt{msg("c", 0, 4, 9), msg("b", 0, 4, 9)}))
	require.Equal(t, int64(5), run.cnt.msgs.Load())
	require.Equal(t, int64(44), run.bytes.Load())
	require.Equal(t, int64(1), run.seen.dups.Load())
	require.Equal(t, "b", spanOf(spans, 2).name)
	require.Equal(t, "a", spanOf(spans, 1).name)
	run.take([]*client.MessageExt{msg("a", 1, 1, 5)})
	<-run.seen.done
	r := run.result("consume push, 1 consumer", time.Second)
	require.Equal(t, int64(6), r.Messages)
	require.Equal(t, int64(1), r.Duplicates)
	require.Equal(t, 8, r.Size)
	require.InDelta(t, 6.0, r.MsgsPerSec, 1e-9)
	r.Consumers = 1
	require.True(t, strings.HasSuffix(r.String(), "; 1 duplicates"), r.String())
}

// Settings that belong to the other path are refused; defaults fill in.
func TestBenchConsumeConfigCheck(t *testing.T) {
	newClient := func() (*client.Client, error) { return nil, nil }
	for _, c := range []struct {
		cfg ConsumeConfig
		err string
	}{
		{ConsumeConfig{}, ""},
		{ConsumeConfig{Readers: 4, From: "n1:1"}, ""},
		{ConsumeConfig{Consumers: 2}, "push consumers only"},
		{ConsumeConfig{ConsumeBatch: 8}, "push consumers only"},
		{ConsumeConfig{QueueCache: 8}, "push consumers only"},
		{ConsumeConfig{Push: true, NewClient: newClient}, ""},
		{ConsumeConfig{Push: true, NewClient: newClient, Readers: 2}, "pulls only"},
		{ConsumeConfig{Push: true, NewClient: newClient, From: "n1:1"}, "pulls only"},
		{ConsumeConfig{Push: true, NewClient: newClient, ConsumeBatch: -1}, "negative"},
		{ConsumeConfig{Push: true}, "NewClient"},
		{ConsumeConfig{Queues: -1}, "negative queues"},
	} {
		err := c.cfg.check()
		if c.err != "" {
			require.ErrorContains(t, err, c.err, "%+v", c.cfg)
			continue
		}
		require.NoError(t, err, "%+v", c.cfg)
		require.Equal(t, client.DefaultPullBatch, c.cfg.Batch)
		require.GreaterOrEqual(t, c.cfg.Readers, 1)
		if c.cfg.Push {
			require.Equal(t, 1, c.cfg.Consumers)
			require.Equal(t, client.DefaultPullBatch, c.cfg.ConsumeBatch, "a callback per pull")
			require.Equal(t, DefaultStall, c.cfg.Stall)
		}
	}
}

// Pulls and push consumers (one, and three sharing four queues) read a
// filled topic of an in-process group: every message once.
func TestBenchConsumePullAndPush(t *testing.T) {
	newClient, c, ctx := groupClient(t)
	require.Eventually(t, func() bool { return c.CreateTopic(ctx, "bench", 4) == nil }, 10*time.Second, 20*time.Millisecond)
	pr, err := Produce(ctx, c, ProduceConfig{Topic: "bench", Queues: 4, Size: 100, Window: 64, Batch: 16, Producers: 1, Duration: 500 * time.Millisecond})
	require.NoError(t, err)
	require.Zero(t, pr.Errors)
	want := pr.Messages

	r, err := Consume(ctx, c, ConsumeConfig{Topic: "bench", Readers: 2})
	require.NoError(t, err)
	require.Equal(t, want, r.Messages)
	require.Zero(t, r.Duplicates)
	require.Equal(t, 100, r.Size)
	require.Equal(t, "consume, 1 topic x 4 queues", r.Mode)
	require.Equal(t, 1, r.Topics)
	require.Equal(t, 4, r.Queues)

	for _, n := range []int{1, 3} {
		r, err := Consume(ctx, c, ConsumeConfig{Topic: "bench", Push: true, Consumers: n, NewClient: newClient, Stall: 20 * time.Second})
		require.NoError(t, err, "%d consumers", n)
		require.Equal(t, want, r.Messages, "%d consumers", n)
		require.Equal(t, n, r.Consumers)
		require.Equal(t, 32, r.ConsumeBatch)
		require.Zero(t, r.Errors, r.FirstErr)
		t.Logf("%s", r)
	}
}

// startGroup starts a three-node group in this process and returns its
// client addresses.
func startGroup(t *testing.T) []string { return testgroup.Start(t) }

// groupClient starts an in-process group and returns a way to make clients
// of it, one client (closed at the end of the test) and a context for the
// test's requests.
func groupClient(t *testing.T) (func() (*client.Client, error), *client.Client, context.Context) {
	t.Helper()
	addrs := startGroup(t)
	newClient := func() (*client.Client, error) {
		return client.New(client.Options{Addrs: addrs, RequestTimeout: 2 * time.Second})
	}
	c, err := newClient()
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return newClient, c, ctx
}
