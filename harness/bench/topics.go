package bench

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftmq/raftmq/client"
)

// TopicNames returns the topics of a run over n topics named after base:
// base itself for one topic (as before there was a choice), otherwise
// base-0 ... base-(n-1).
func TopicNames(base string, n int) []string {
	if n <= 1 {
		return []string{base}
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", base, i)
	}
	return names
}

// layout describes topics holding queues in all, for a result line:
// "1 topic x 4 queues", "128 topics x 8 queues = 1024 queues".
func layout(topics, queues int) string {
	if topics <= 0 {
		return fmt.Sprintf("%d %s", queues, plural(queues, "queue"))
	}
	if queues%topics != 0 {
		return fmt.Sprintf("%d %s, %d queues in all", topics, plural(topics, "topic"), queues)
	}
	per := queues / topics
	s := fmt.Sprintf("%d %s x %d %s", topics, plural(topics, "topic"), per, plural(per, "queue"))
	if topics > 1 {
		s += fmt.Sprintf(" = %d queues", queues)
	}
	return s
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// slotOf maps a send's position in a run's rotation to its topic and
// queue: consecutive sends go to consecutive topics, and every topic's
// queues take turns, so that sends spread evenly over all topics*queues
// queues (each gets every topics*queues-th send) and a window of sends in
// flight spans as many topics as it can.
func slotOf(slot, topics int) (topic int, queue int32) {
	return slot % topics, int32(slot / topics)
}

// createInFlight is how many topic creations a run keeps in flight: each
// is a raft round, and the leader packs those waiting into one entry.
const createInFlight = 16

// createTopics creates every topic of names with queues queues through
// the admin path (UPDATE_AND_CREATE_TOPIC, each answered once committed),
// then fetches each one's route, as a producer would before its first
// send. With more than one topic it writes a progress line per second and
// a summary to w. It returns how long the creations took (routes not
// included).
func createTopics(ctx context.Context, c *client.Client, names []string, queues int, w io.Writer) (time.Duration, error) {
	many := len(names) > 1 && w != nil
	start := time.Now()
	var created atomic.Int64
	stop := make(chan struct{})
	var ticker sync.WaitGroup
	if many {
		ticker.Go(func() {
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					n := created.Load()
					fmt.Fprintf(w, "create topics %5.1fs  %6d/%d  %6.0f topics/s\n", time.Since(start).Seconds(), n, len(names), float64(n)/time.Since(start).Seconds())
				}
			}
		})
	}
	err := forEach(ctx, len(names), createInFlight, func(ctx context.Context, i int) error {
		if err := c.CreateTopic(ctx, names[i], queues); err != nil {
			return fmt.Errorf("bench: create topic: %w", err)
		}
		created.Add(1)
		return nil
	})
	took := time.Since(start)
	close(stop)
	ticker.Wait()
	if err != nil {
		return took, err
	}
	if many {
		fmt.Fprintf(w, "created %d topics of %d queues in %.2fs: %.0f topics/s (%d requests in flight)\n",
			len(names), queues, took.Seconds(), float64(len(names))/took.Seconds(), min(createInFlight, len(names)))
	}
	err = forEach(ctx, len(names), createInFlight, func(ctx context.Context, i int) error {
		if _, err := c.Route(ctx, names[i], true); err != nil {
			return fmt.Errorf("bench: route: %w", err)
		}
		return nil
	})
	return took, err
}

// forEach calls fn for 0 <= i < n from at most inFlight goroutines, and
// stops at the first error, which it returns.
func forEach(ctx context.Context, n, inFlight int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(inFlight, n) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(ctx, i); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}
