package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/raftmq/raftmq/client"
)

// PopConfig configures a pop run: fill a topic, read it once with pulls,
// then receive and ack all of it by pop with a new consumer group.
type PopConfig struct {
	Topic  string // created if missing
	Queues int    // queues of the topic (default 4)
	// Messages is how many messages of Size bytes are sent to the topic
	// first (0: none; the run reads what the topic holds).
	Messages int64
	Size     int
	// Consumers is the number of SimpleConsumers (default 4), each on a
	// client of its own made by NewClient; Batch the most messages per
	// receive (default 32) and per pull.
	Consumers int
	Batch     int
	// AckEach acks each message with a request of its own (ACK_MESSAGE)
	// instead of a received batch's in one BATCH_ACK_MESSAGE.
	AckEach bool
	// AckAsync sends a batch's ack in the background while the consumer
	// receives its next batch (one batch ack in flight per consumer), as
	// a consumer that acks asynchronously does; without it a consumer
	// waits for the ack before it receives again.
	AckAsync bool
	// AcksInFlight is, with AckAsync, how many batch acks a consumer has
	// in flight at once (default 1). A RocketMQ 5 PushConsumer keeps
	// receiving while its earlier batches' acks are under way, bounded
	// only by its cache of messages: a window of several acks is its
	// shape.
	AcksInFlight int
	// AckWindow is, with AckEach, how many of a batch's acks a consumer
	// has in flight at once (default: the whole batch; 1: one ack at a
	// time, which measures an ack's own latency).
	AckWindow int
	NewClient func() (*client.Client, error)
	// Invisible is the receives' invisible time (default 30 s).
	Invisible time.Duration
	// Stall ends the run with an error when no message was acked for
	// this long (default DefaultStall).
	Stall    time.Duration
	Progress io.Writer
	// GRPC, a node's gRPC address (plaintext), adds a gRPC pop after the
	// remoting one: the same range received with ReceiveMessage and acked
	// with AckMessage (a batch in one call) by a new group at the leader
	// QueryRoute names.
	GRPC string
	// GRPCClient is the gRPC client: GRPCLean (also when empty) or GRPCGo.
	GRPCClient string
}

// PopResult is a pop run's summary: the pop consumers' rate next to the
// pull rate over the same messages, and ack latency.
type PopResult struct {
	Produce Result `json:"produce"`
	Pull    Result `json:"pull"`
	// Pop counts a message when its first ack succeeded; Duplicates are
	// messages received again after that.
	Pop Result `json:"pop"`
	// Ratio is Pop's msgs/s over Pull's.
	Ratio float64 `json:"popToPull"`
	// Receives and Acks count requests (an ack request acks a whole
	// batch unless AckEach); AckFailures the messages whose ack failed
	// (each comes back after its invisible time).
	Receives    int64 `json:"receives"`
	Acks        int64 `json:"acks"`
	AckEach     bool  `json:"ackEach"`
	AckFailures int64 `json:"ackFailures"`
	// Ack and receive latency, request to answer, in milliseconds (a
	// batch ack's latency is its one request's).
	AckP50     float64 `json:"ackP50ms"`
	AckP99     float64 `json:"ackP99ms"`
	AckMax     float64 `json:"ackMaxms"`
	ReceiveP50 float64 `json:"receiveP50ms"`
	ReceiveP99 float64 `json:"receiveP99ms"`
	// Means, in milliseconds: a consumer's round is its receive and (unless
	// acks are sent in the background) its ack, and a rate follows from the
	// mean round, not the median.
	ReceiveMean float64 `json:"receiveMeanms"`
	AckMean     float64 `json:"ackMeanms"`
	// GRPCPop is the gRPC pop's rate (PopConfig.GRPC), with its request
	// counts and latencies.
	GRPCPop         *Result `json:"grpcPop,omitempty"`
	GRPCReceives    int64   `json:"grpcReceives,omitempty"`
	GRPCAcks        int64   `json:"grpcAcks,omitempty"`
	GRPCAckFailures int64   `json:"grpcAckFailures,omitempty"`
	GRPCAckP50      float64 `json:"grpcAckP50ms,omitempty"`
	GRPCAckP99      float64 `json:"grpcAckP99ms,omitempty"`
	GRPCReceiveP50  float64 `json:"grpcReceiveP50ms,omitempty"`
	GRPCReceiveP99  float64 `json:"grpcReceiveP99ms,omitempty"`
}

func (r PopResult) String() string {
	s := ""
	if r.Produce.Messages > 0 {
		s += r.Produce.String() + "\n"
	}
	s += r.Pull.String() + "\n" + r.Pop.String() + "\n"
	acks := "batch acks"
	if r.AckEach {
		acks = "acks"
	}
	s += fmt.Sprintf("pop/pull: %.0f%%; %d receives (p50 %.3f ms, p99 %.3f, mean %.3f), %d %s: p50 %.3f ms, p99 %.3f, max %.3f, mean %.3f; %d acks failed",
		100*r.Ratio, r.Receives, r.ReceiveP50, r.ReceiveP99, r.ReceiveMean, r.Acks, acks, r.AckP50, r.AckP99, r.AckMax, r.AckMean, r.AckFailures)
	if r.GRPCPop != nil {
		s += "\n" + r.GRPCPop.String() + "\n"
		s += fmt.Sprintf("grpc: %d receives (p50 %.3f ms, p99 %.3f), %d batch acks: p50 %.3f ms, p99 %.3f; %d acks failed",
			r.GRPCReceives, r.GRPCReceiveP50, r.GRPCReceiveP99, r.GRPCAcks, r.GRPCAckP50, r.GRPCAckP99, r.GRPCAckFailures)
	}
	return s
}

// latencies collects request durations.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// mean returns the mean in ms.
func (l *latencies) mean() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range l.d {
		sum += d
	}
	return float64(sum) / float64(len(l.d)) / float64(time.Millisecond)
}

// quantiles returns the 0.5 and 0.99 quantiles and the maximum in ms.
func (l *latencies) quantiles() (p50, p99, mx float64) {
	l.mu.Lock()
	d := slices.Clone(l.d)
	l.mu.Unlock()
	if len(d) == 0 {
		return 0, 0, 0
	}
	slices.Sort(d)
	return quantile(d, 0.5), quantile(d, 0.99), quantile(d, 1)
}

// Pop runs a pop benchmark: it sends cfg.Messages to the topic, reads the
// topic's queues from start to end with one puller per queue (the
// consume run's pull rate), then has cfg.Consumers SimpleConsumers of a
// new group receive up to cfg.Batch messages at a time and ack them, a
// batch in one request (or with AckEach each message on its own,
// cfg.AckWindow of a batch's acks in flight at once), until every message
// of the same range was acked.
func Pop(ctx context.Context, c *client.Client, cfg PopConfig) (PopResult, error) {
	if cfg.Queues <= 0 {
		cfg.Queues = 4
	}
	if cfg.Consumers <= 0 {
		cfg.Consumers = 4
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 32
	}
	if cfg.Batch > 32 {
		return PopResult{}, fmt.Errorf("bench: pop batch %d: a receive takes 1 to 32 messages", cfg.Batch)
	}
	if cfg.AckWindow <= 0 {
		cfg.AckWindow = cfg.Batch
	}
	if cfg.AcksInFlight <= 0 {
		cfg.AcksInFlight = 1
	}
	if cfg.Invisible <= 0 {
		cfg.Invisible = 30 * time.Second
	}
	if cfg.Stall <= 0 {
		cfg.Stall = DefaultStall
	}
	if cfg.NewClient == nil {
		return PopResult{}, errors.New("bench: pop run without NewClient")
	}
	var out PopResult
	if cfg.Messages > 0 {
		r, err := Produce(ctx, c, ProduceConfig{Topic: cfg.Topic, Queues: cfg.Queues, Size: cfg.Size, Window: 64, Batch: 32,
			Producers: 1, Duration: time.Hour, Messages: cfg.Messages, Progress: cfg.Progress})
		if err != nil {
			return out, err
		}
		out.Produce = r
	}
	pull, err := Consume(ctx, c, ConsumeConfig{Topic: cfg.Topic, Queues: cfg.Queues, Batch: cfg.Batch, Progress: cfg.Progress})
	if err != nil {
		return out, err
	}
	out.Pull = pull
	pop, err := popRun(ctx, cfg, &out)
	out.Pop = pop
	if pull.MsgsPerSec > 0 {
		out.Ratio = pop.MsgsPerSec / pull.MsgsPerSec
	}
	if err != nil || cfg.GRPC == "" {
		return out, err
	}
	gp, err := grpcPopRun(ctx, c, cfg, &out)
	out.GRPCPop = &gp
	return out, err
}

// popRun receives and acks the topic's range with the consumers.
func popRun(ctx context.Context, cfg PopConfig, out *PopResult) (Result, error) {
	cl, err := cfg.NewClient()
	if err != nil {
		return Result{}, fmt.Errorf("bench: pop client: %w", err)
	}
	spans, ranges, err := consumeRanges(ctx, cl, []string{cfg.Topic}, cfg.Queues)
	cl.Close()
	if err != nil {
		return Result{}, err
	}
	group := fmt.Sprintf("bench-pop-%d", time.Now().UnixNano())
	consumers := make([]*client.SimpleConsumer, 0, cfg.Consumers)
	for range cfg.Consumers {
		cl, err := cfg.NewClient()
		if err != nil {
			return Result{}, fmt.Errorf("bench: pop consumer client: %w", err)
		}
		defer cl.Close()
		sc := cl.NewSimpleConsumer(group, cfg.Topic, client.SimpleConsumerOptions{Await: time.Second})
		if err := sc.Start(ctx); err != nil {
			return Result{}, fmt.Errorf("bench: %w", err)
		}
		consumers = append(consumers, sc)
	}
	run, err := newConsumeRun(spans, ranges)
	if err != nil {
		return Result{}, err
	}
	var (
		acks, receives latencies
		ackFailures    int64
		mu             sync.Mutex
	)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	run.begin()
	stop := make(chan struct{})
	go progress(cfg.Progress, "pop", &run.cnt, run.start, stop)
	var wg sync.WaitGroup
	for _, sc := range consumers {
		wg.Go(func() {
			var pending sync.WaitGroup
			defer pending.Wait()
			ackSlots := make(chan struct{}, cfg.AcksInFlight)
			for rctx.Err() == nil {
				t0 := time.Now()
				msgs, err := sc.Receive(rctx, cfg.Batch, cfg.Invisible)
				if err != nil {
					if rctx.Err() == nil {
						run.cnt.fail(err)
						time.Sleep(10 * time.Millisecond)
					}
					continue
				}
				receives.add(time.Since(t0))
				if !cfg.AckEach {
					if len(msgs) == 0 {
						continue
					}
					ack := func() {
						t0 := time.Now()
						errs := sc.AckBatch(rctx, msgs)
						d := time.Since(t0)
						var done []*client.MessageExt
						failed := false
						for i, err := range errs {
							if err == nil {
								done = append(done, msgs[i].MessageExt)
							} else if rctx.Err() == nil {
								failed = true
								mu.Lock()
								ackFailures++
								mu.Unlock()
								run.cnt.fail(err)
							}
						}
						if !failed && len(done) == len(msgs) {
							acks.add(d)
						}
						run.take(done)
					}
					if !cfg.AckAsync {
						ack()
						continue
					}
					ackSlots <- struct{}{} // at most AcksInFlight batch acks in flight per consumer
					pending.Go(func() {
						defer func() { <-ackSlots }()
						ack()
					})
					continue
				}
				var awg sync.WaitGroup
				slots := make(chan struct{}, cfg.AckWindow)
				for _, m := range msgs {
					slots <- struct{}{}
					awg.Go(func() {
						defer func() { <-slots }()
						t0 := time.Now()
						err := sc.Ack(rctx, m)
						if err != nil {
							if rctx.Err() == nil {
								mu.Lock()
								ackFailures++
								mu.Unlock()
								run.cnt.fail(err)
							}
							return
						}
						acks.add(time.Since(t0))
						run.take([]*client.MessageExt{m.MessageExt})
					})
				}
				awg.Wait()
			}
		})
	}
	elapsed, err := waitConsumed(ctx, run, cfg.Stall)
	close(stop)
	cancel()
	wg.Wait()
	out.Receives, out.Acks, out.AckFailures, out.AckEach = int64(len(receives.d)), int64(len(acks.d)), ackFailures, cfg.AckEach
	out.AckP50, out.AckP99, out.AckMax = acks.quantiles()
	out.ReceiveP50, out.ReceiveP99, _ = receives.quantiles()
	out.ReceiveMean, out.AckMean = receives.mean(), acks.mean()
	res := run.result(fmt.Sprintf("pop, %d consumers, %s", cfg.Consumers, layout(1, len(ranges))), elapsed)
	res.Batch, res.Consumers, res.Window = cfg.Batch, cfg.Consumers, cfg.AckWindow
	if !cfg.AckEach {
		res.Window = 1
	}
	return res, err
}
