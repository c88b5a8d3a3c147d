package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftmq/raftmq/client"
)

// ConsumeConfig configures a consume run: read every queue of the run's
// topics from its minimum offset up to the maximum found at the start.
// The run ends when every message of that range was consumed at least
// once; further deliveries count as duplicates.
type ConsumeConfig struct {
	// Topic names the topic, or with Topics > 1 the stem of the topics'
	// names, as a produce run names them (TopicNames).
	Topic  string
	Topics int // default 1
	// Queues, when > 0, is the number of queues each topic must have: a
	// run over a layout other than the one asked for fails rather than
	// measuring something else. 0 takes whatever each topic has.
	Queues int
	Batch  int    // messages per pull (default 32), pulls and push consumers alike
	From   string // node to pull from ("" = the leader); pulls only
	// Readers per queue (default 1, as a RocketMQ consumer pulls): the
	// queue's range is split into that many parts read concurrently, so
	// that more pulls are in flight. Pulls only.
	Readers int

	// Push consumes through Consumers (default 1) push consumers of one
	// new consumer group (client.PushConsumer, clustering, from the first
	// offset), each on a Client of its own made by NewClient; they share
	// the topic's queues through the group's rebalancing.
	Push      bool
	Consumers int
	NewClient func() (*client.Client, error)
	// ConsumeBatch is the push consumers' ConsumeBatchSize; 0 means
	// Batch: a callback gets a whole pull, as a pull run counts one. (The
	// client's default, 1, spends a goroutine, a callback slot and a
	// round of its queue's and offset store's locks on every message:
	// ~1.2 µs more client CPU a message than pulls, and ~23 % less
	// throughput, on a 2-CPU machine.)
	ConsumeBatch int
	// ConsumeGoroutines and QueueCache are the push consumers'
	// ConsumeGoroutines and QueueCacheSize (MaxSpan is twice QueueCache);
	// 0 takes the client's defaults.
	ConsumeGoroutines, QueueCache int
	// Stall ends a push run with an error when no message of the range
	// arrived for this long (default 30 s): a queue nobody consumes would
	// otherwise keep it waiting forever.
	Stall time.Duration

	Progress io.Writer
}

// DefaultStall is ConsumeConfig.Stall's default.
const DefaultStall = 30 * time.Second

// check fills in defaults and rejects settings that do not go together.
func (cfg *ConsumeConfig) check() error {
	if cfg.Batch <= 0 {
		cfg.Batch = client.DefaultPullBatch
	}
	cfg.Readers = max(cfg.Readers, 1)
	cfg.Topics = max(cfg.Topics, 1)
	if cfg.Queues < 0 {
		return errors.New("bench: negative queues")
	}
	if !cfg.Push {
		if cfg.Consumers > 1 || cfg.ConsumeBatch > 0 || cfg.ConsumeGoroutines > 0 || cfg.QueueCache > 0 {
			return errors.New("bench: consumers, consume batch, consume goroutines and queue cache apply to push consumers only")
		}
		return nil
	}
	if cfg.Readers > 1 || cfg.From != "" {
		return errors.New("bench: readers and from apply to pulls only; push consumers pull from the leader, one pull at a time per queue")
	}
	if cfg.ConsumeBatch < 0 || cfg.ConsumeGoroutines < 0 || cfg.QueueCache < 0 {
		return errors.New("bench: negative push consumer setting")
	}
	if cfg.NewClient == nil {
		return errors.New("bench: push consumers need NewClient")
	}
	cfg.Consumers = max(cfg.Consumers, 1)
	if cfg.ConsumeBatch == 0 {
		cfg.ConsumeBatch = cfg.Batch
	}
	if cfg.Stall <= 0 {
		cfg.Stall = DefaultStall
	}
	return nil
}

// topicSpan is one topic of a consume run: its queues are the run's
// queues base ... base+queues-1, the keys of its seen set and its ranges.
type topicSpan struct {
	name         string
	base, queues int32
}

// consumeRanges returns the run's topics and every readable queue's
// [min, max) offsets, each range's Queue being the queue's key in the run
// (its topic's base plus its queue id). With want > 0 every topic must
// have want read queues.
func consumeRanges(ctx context.Context, c *client.Client, names []string, want int) ([]topicSpan, []queueRange, error) {
	spans := make([]topicSpan, len(names))
	err := forEach(ctx, len(names), createInFlight, func(ctx context.Context, i int) error {
		rt, err := c.Route(ctx, names[i], true)
		if err != nil {
			return fmt.Errorf("bench: route: %w", err)
		}
		if want > 0 && rt.ReadQueues != want {
			return fmt.Errorf("bench: topic %s has %d read queues, not %d", names[i], rt.ReadQueues, want)
		}
		spans[i] = topicSpan{name: names[i], queues: int32(rt.ReadQueues)}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	var ranges []queueRange
	for i := range spans {
		if i > 0 {
			spans[i].base = spans[i-1].base + spans[i-1].queues
		}
		for q := range spans[i].queues {
			ranges = append(ranges, queueRange{Queue: spans[i].base + q})
		}
	}
	err = forEach(ctx, len(ranges), createInFlight, func(ctx context.Context, i int) error {
		sp := spanOf(spans, ranges[i].Queue)
		q := ranges[i].Queue - sp.base
		lo, err := c.MinOffset(ctx, sp.name, q)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		hi, err := c.MaxOffset(ctx, sp.name, q)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		ranges[i].Lo, ranges[i].Hi = lo, hi
		return nil
	})
	return spans, ranges, err
}

// spanOf returns the topic of spans that holds the run's queue key.
func spanOf(spans []topicSpan, key int32) topicSpan {
	i := sort.Search(len(spans), func(i int) bool { return spans[i].base+spans[i].queues > key })
	return spans[i]
}

// consumeRun is what both consume paths count while they run.
type consumeRun struct {
	spans  []topicSpan
	topics map[string]topicSpan // spans by name
	seen   *seenSet
	bytes  atomic.Int64
	start  time.Time
	lat    *recorder
	cnt    counters
}

func newConsumeRun(spans []topicSpan, ranges []queueRange) (*consumeRun, error) {
	seen, err := newSeenSet(ranges)
	if err != nil {
		return nil, err
	}
	r := &consumeRun{seen: seen, spans: spans, topics: make(map[string]topicSpan, len(spans))}
	for _, sp := range spans {
		r.topics[sp.name] = sp
	}
	r.begin()
	return r, nil
}

// begin (re)starts the run's clock and timeline.
func (r *consumeRun) begin() {
	r.start = time.Now()
	r.lat = newRecorder(r.start)
	r.cnt.rec = r.lat
}

// take counts a batch of delivered messages of the run's topics: the
// first delivery of an offset of the range counts as consumed, later ones
// as duplicates, offsets outside the range (or of other topics or queues)
// not at all. It returns the messages newly consumed.
func (r *consumeRun) take(msgs []*client.MessageExt) int64 {
	var fresh, dups, size int64
	var sp topicSpan
	known := false
	for i, m := range msgs {
		if i == 0 || m.Topic != sp.name {
			// A batch is one queue's: one look-up for all of it.
			sp, known = r.topics[m.Topic]
			sp.name = m.Topic
		}
		if !known || m.QueueID < 0 || m.QueueID >= sp.queues {
			continue
		}
		first, in := r.seen.mark(sp.base+m.QueueID, m.QueueOffset)
		switch {
		case !in:
		case first:
			fresh++
			size += int64(len(m.Body))
		default:
			dups++
		}
	}
	r.bytes.Add(size)
	r.cnt.msgs.Add(fresh)
	r.seen.count(fresh, dups) // last: it may end the run
	return fresh
}

// result summarizes the run, elapsed long.
func (r *consumeRun) result(mode string, elapsed time.Duration) Result {
	el := elapsed.Seconds()
	res := Result{Mode: mode, Messages: r.cnt.msgs.Load(), Errors: r.cnt.errs.Load(), Seconds: el, Duplicates: r.seen.dups.Load()}
	res.MsgsPerSec = float64(res.Messages) / el
	res.MBPerSec = float64(r.bytes.Load()) / el / 1e6
	if res.Messages > 0 {
		res.Size = int(r.bytes.Load() / res.Messages)
	}
	if p := r.cnt.firstErr.Load(); p != nil {
		res.FirstErr = *p
	}
	res.Series = timeline(r.lat, elapsed)
	return res
}

// Consume runs a consume benchmark: pulls (the default) or push consumers
// (cfg.Push). The clock starts once the queues' ranges are known and stops
// when the last message of them is consumed.
func Consume(ctx context.Context, c *client.Client, cfg ConsumeConfig) (Result, error) {
	if err := cfg.check(); err != nil {
		return Result{}, err
	}
	spans, ranges, err := consumeRanges(ctx, c, TopicNames(cfg.Topic, cfg.Topics), cfg.Queues)
	if err != nil {
		return Result{}, err
	}
	var r Result
	if cfg.Push {
		r, err = consumePush(ctx, cfg, spans, ranges)
	} else {
		r, err = consumePull(ctx, c, cfg, spans, ranges)
	}
	if r.Mode != "" {
		r.Topics, r.Queues = len(spans), len(ranges)
		r.Mode += ", " + layout(r.Topics, r.Queues)
	}
	return r, err
}

// consumePull reads each queue's range with Readers goroutines pulling one
// batch at a time.
func consumePull(ctx context.Context, c *client.Client, cfg ConsumeConfig, spans []topicSpan, ranges []queueRange) (Result, error) {
	pc := c.NewPullConsumer("bench-consumer")
	run, err := newConsumeRun(spans, ranges)
	if err != nil {
		return Result{}, err
	}
	var (
		wg   sync.WaitGroup
		stop = make(chan struct{})
	)
	go progress(cfg.Progress, "consume", &run.cnt, run.start, stop)
	for _, qr := range ranges {
		lo, hi := qr.Lo, qr.Hi
		sp := spanOf(spans, qr.Queue)
		topic := sp.name
		for part := 0; part < cfg.Readers; part++ {
			from := lo + (hi-lo)*int64(part)/int64(cfg.Readers)
			to := lo + (hi-lo)*int64(part+1)/int64(cfg.Readers)
			wg.Add(1)
			go func(q int32, off, hi int64) {
				defer wg.Done()
				for off < hi && ctx.Err() == nil {
					var pr client.PullResult
					var err error
					t0 := time.Now()
					if cfg.From != "" {
						pr, err = pc.PullFrom(ctx, cfg.From, topic, q, off, cfg.Batch, 0)
					} else {
						pr, err = pc.Pull(ctx, topic, q, off, cfg.Batch, 0)
					}
					if err != nil {
						run.cnt.fail(err)
						time.Sleep(10 * time.Millisecond)
						continue
					}
					mine := pr.Messages
					for i, m := range mine {
						if m.QueueOffset >= hi {
							mine = mine[:i] // the next reader's part
							break
						}
					}
					n := run.take(mine)
					run.lat.add(time.Since(t0), int(n))
					if pr.NextBeginOffset <= off && len(pr.Messages) == 0 {
						break
					}
					off = pr.NextBeginOffset
				}
			}(qr.Queue-sp.base, from, to)
		}
	}
	wg.Wait()
	close(stop)
	r := run.result("consume", time.Since(run.start))
	r.Batch = cfg.Batch
	return r, nil
}

// pushSampleEvery is how often a push run records its consumed count for
// the timeline: its callbacks record nothing themselves, so that the run
// measures the consumer rather than the bench's bookkeeping.
const pushSampleEvery = 50 * time.Millisecond

// consumePush consumes the ranges with cfg.Consumers push consumers of a
// new consumer group, starting from the first offset. The clock runs from
// just before the consumers start (so it includes their heartbeats and
// first rebalances) until the last message of the ranges is consumed.
// Duplicates are counted until every consumer has shut down.
func consumePush(ctx context.Context, cfg ConsumeConfig, spans []topicSpan, ranges []queueRange) (Result, error) {
	group := fmt.Sprintf("bench-push-%d", time.Now().UnixNano())
	clients := make([]*client.Client, 0, cfg.Consumers)
	defer func() {
		for _, cl := range clients {
			_ = cl.Close()
		}
	}()
	for range cfg.Consumers {
		cl, err := cfg.NewClient()
		if err != nil {
			return Result{}, fmt.Errorf("bench: push consumer client: %w", err)
		}
		clients = append(clients, cl)
	}
	run, err := newConsumeRun(spans, ranges)
	if err != nil {
		return Result{}, err
	}
	subs := make(map[string]client.Subscription, len(spans))
	for _, sp := range spans {
		subs[sp.name] = client.Subscription{}
	}
	opts := client.PushConsumerOptions{
		Group:             group,
		Subscriptions:     subs,
		ConsumeFrom:       client.ConsumeFromFirstOffset,
		PullBatchSize:     cfg.Batch,
		ConsumeBatchSize:  cfg.ConsumeBatch,
		ConsumeGoroutines: cfg.ConsumeGoroutines,
		QueueCacheSize:    cfg.QueueCache,
		MaxSpan:           2 * cfg.QueueCache,
	}
	fn := func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		run.take(msgs)
		return client.ConsumeSuccess
	}
	consumers := make([]*client.PushConsumer, len(clients))
	for i, cl := range clients {
		if consumers[i], err = cl.NewPushConsumer(opts, fn); err != nil {
			return Result{}, fmt.Errorf("bench: %w", err)
		}
	}

	run.begin()
	stop := make(chan struct{})
	go progress(cfg.Progress, "consume push", &run.cnt, run.start, stop)
	// The consumers start at once, so that their first rebalances see
	// each other as early as the group's heartbeats allow.
	startErrs := make([]error, len(consumers))
	var wg sync.WaitGroup
	for i, pc := range consumers {
		wg.Go(func() { startErrs[i] = pc.Start(ctx) })
	}
	wg.Wait()
	elapsed, err := time.Duration(0), errors.Join(startErrs...)
	if err == nil {
		elapsed, err = waitConsumed(ctx, run, cfg.Stall)
	} else {
		err = fmt.Errorf("bench: %w", err)
	}
	close(stop)

	// Shut down whatever started, counting the deliveries until then.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	stopErrs := make([]error, len(consumers))
	for i, pc := range consumers {
		if startErrs[i] == nil {
			wg.Go(func() { stopErrs[i] = pc.Shutdown(sctx) })
		}
	}
	wg.Wait()
	if err := errors.Join(stopErrs...); err != nil {
		run.cnt.fail(err)
	}
	if elapsed == 0 {
		return Result{}, err
	}
	mode := fmt.Sprintf("consume push, %d consumers", cfg.Consumers)
	if cfg.Consumers == 1 {
		mode = "consume push, 1 consumer"
	}
	res := run.result(mode, elapsed)
	res.Batch, res.Consumers, res.ConsumeBatch = cfg.Batch, cfg.Consumers, cfg.ConsumeBatch
	return res, err
}

// waitConsumed records the run's consumed count every pushSampleEvery
// until every message of the run is consumed, ctx ends (a partial result,
// as a cancelled pull run gives) or nothing new arrives for stall (an
// error naming the first message missing). It returns the time elapsed.
func waitConsumed(ctx context.Context, run *consumeRun, stall time.Duration) (time.Duration, error) {
	t := time.NewTicker(pushSampleEvery)
	defer t.Stop()
	var recorded int64
	lastNew := time.Now()
	sample := func() {
		n := run.cnt.msgs.Load()
		if n > recorded {
			run.lat.add(0, int(n-recorded))
			recorded = n
			lastNew = time.Now()
		}
	}
	for {
		select {
		case <-run.seen.done:
			elapsed := time.Since(run.start)
			sample()
			return elapsed, nil
		case <-ctx.Done():
			sample()
			return time.Since(run.start), nil
		case <-t.C:
			sample()
			if time.Since(lastNew) > stall {
				n, key, off := run.seen.missing()
				sp := spanOf(run.spans, key)
				return time.Since(run.start), fmt.Errorf("bench: push consumers stalled: nothing new for %v, %d messages not consumed (the first: %s queue %d offset %d)", stall, n, sp.name, key-sp.base, off)
			}
		}
	}
}
