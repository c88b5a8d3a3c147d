package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/harness/localgroup"
)

// clusterDemo sends n 1 KiB messages through the group (pipelined, fsynced
// on a quorum before each ack) and reads them all back from a follower.
func clusterDemo(ctx context.Context, log *slog.Logger, g *localgroup.Group, n int) error {
	cl, err := client.New(client.Options{Addrs: g.Addrs(), Logger: log, TLS: g.TLS()})
	if err != nil {
		return err
	}
	defer cl.Close()
	const topic = "demo"
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := cl.CreateTopic(cctx, topic, 4); err != nil {
		return fmt.Errorf("demo: create topic: %w", err)
	}
	rt, err := cl.Route(cctx, topic, true)
	if err != nil {
		return fmt.Errorf("demo: route: %w", err)
	}
	before := make([]int64, rt.ReadQueues)
	for q := range before {
		if before[q], err = cl.MaxOffset(cctx, topic, int32(q)); err != nil {
			return err
		}
	}
	p := cl.NewProducer(client.ProducerOptions{Group: "demo", Window: 256})
	body := make([]byte, 1024)
	start := time.Now()
	errc := make(chan error, 1)
	for i := 0; i < n; i++ {
		err := p.SendAsync(ctx, &client.Message{Topic: topic, QueueID: int32(i % rt.WriteQueues), Body: body, Keys: []string{fmt.Sprint("demo-", i)}},
			func(_ client.SendResult, err error) {
				if err != nil {
					select {
					case errc <- err:
					default:
					}
				}
			})
		if err != nil {
			return err
		}
	}
	if err := p.Flush(ctx); err != nil {
		return err
	}
	select {
	case err := <-errc:
		return fmt.Errorf("demo: send: %w", err)
	default:
	}
	el := time.Since(start)
	fmt.Printf("sent %d messages of 1 KiB, acknowledged after fsync on a quorum: %.0f msgs/s\n", n, float64(n)/el.Seconds())
	// Read them back from a follower (followers serve committed data):
	// one that is up, waiting for it to catch up; if none is, from the
	// leader.
	from := rt.Addrs[0]
	for _, nd := range g.Nodes {
		if nd.Client != rt.Addrs[0] && nd.Running() {
			from = nd.Client
			break
		}
	}
	pc := cl.NewPullConsumer("demo-reader")
	got := 0
	deadline := time.Now().Add(30 * time.Second)
	for q := 0; q < rt.ReadQueues; q++ {
		off := before[q]
		want := before[q] + int64(n/rt.WriteQueues)
		if q < n%rt.WriteQueues {
			want++
		}
		for off < want && time.Now().Before(deadline) {
			r, err := pc.PullFrom(ctx, from, topic, int32(q), off, 32, 100*time.Millisecond)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				time.Sleep(100 * time.Millisecond) // catching up, or restarting
				continue
			}
			got += len(r.Messages)
			off = r.NextBeginOffset
		}
	}
	fmt.Printf("read %d of them back from %s\n", got, from)
	if got != n {
		return fmt.Errorf("demo: read back %d of %d messages from %s within 30 s", got, n, from)
	}
	return nil
}
