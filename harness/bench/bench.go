// Package bench measures a running group through the Go client: produce
// throughput and acknowledgement latency (sync, pipelined, batched) and
// consume throughput (pulls, or push consumers of one group). It backs
// `raftmq bench`.
package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/raftmq/raftmq/client"
)

// ProduceConfig configures a produce run.
type ProduceConfig struct {
	// Topic names the run's topic, or with Topics > 1 the stem of its
	// topics' names (TopicNames). Every topic gets Queues queues (default
	// 4) and is created through the admin path before the clock starts;
	// the sends rotate over all Topics*Queues queues, so that each gets
	// the same share.
	Topic     string
	Topics    int // default 1
	Queues    int
	Size      int // body bytes
	Window    int // in-flight sends per producer; 1 = one at a time (sync)
	Batch     int // messages per send (>1 uses batches)
	Producers int // concurrent producers
	// AutoBatch packs pipelined sends waiting behind others into batch
	// requests (client.ProducerOptions.AutoBatch).
	AutoBatch bool
	Duration  time.Duration // how long to send
	// Messages, when > 0, ends the run once that many messages were
	// sent (the last batch may be shorter), or at Duration if sooner: a
	// run that fills queues with a given amount.
	Messages int64
	Progress io.Writer // a line per second (nil: none)
	// GRPC, when set, is a node's RocketMQ 5 gRPC address: the run sends
	// over gRPC (SendMessage, Batch messages per call, Window calls in
	// flight per producer) to the leader QueryRoute names there, instead
	// of over remoting; AutoBatch does not apply.
	GRPC string
	// GRPCClient is the gRPC client: GRPCLean (also when empty) or GRPCGo.
	GRPCClient string
	// GRPCConns is how many connections the gRPC producers share, producer
	// p on connection p mod GRPCConns: 0 or 1 is one for all, as the
	// remoting producers share their client's connection to the leader;
	// Producers gives each its own, as each RocketMQ 5 client has.
	GRPCConns int
}

// Result is a run's summary.
type Result struct {
	Mode       string  `json:"mode"`
	Messages   int64   `json:"messages"`
	Errors     int64   `json:"errors"`
	Seconds    float64 `json:"seconds"`
	MsgsPerSec float64 `json:"msgsPerSec"`
	MBPerSec   float64 `json:"mbPerSec"`
	// Latency of each send (a batch counts once), request to answer, in
	// milliseconds; with a window it includes queueing behind it.
	P50  float64 `json:"p50ms,omitempty"`
	P90  float64 `json:"p90ms,omitempty"`
	P99  float64 `json:"p99ms,omitempty"`
	P999 float64 `json:"p999ms,omitempty"`
	Max  float64 `json:"maxms,omitempty"`
	// Settings, so a number is never quoted without them.
	Size      int  `json:"size"`
	Window    int  `json:"window,omitempty"`
	Batch     int  `json:"batch,omitempty"`
	Producers int  `json:"producers,omitempty"`
	AutoBatch bool `json:"autoBatch,omitempty"`
	// A consume run counts each message of its range once (Messages) and
	// every further delivery of one as a duplicate. Consumers is the push
	// consumers of a push run (0 for pulls), ConsumeBatch the most
	// messages one of their callbacks got.
	Duplicates   int64 `json:"duplicates,omitempty"`
	Consumers    int   `json:"consumers,omitempty"`
	ConsumeBatch int   `json:"consumeBatch,omitempty"`
	// Topics and Queues are the topics the run used and their queues in
	// all (not per topic). A produce run also reports the fewest and most
	// messages acknowledged to one queue (QueueMin, QueueMax) and how long
	// creating its topics took (CreateSeconds).
	Topics        int     `json:"topics"`
	Queues        int     `json:"queues"`
	QueueMin      int64   `json:"queueMinMessages,omitempty"`
	QueueMax      int64   `json:"queueMaxMessages,omitempty"`
	CreateSeconds float64 `json:"createSeconds,omitempty"`
	FirstErr      string  `json:"firstError,omitempty"`
	// Series is the run's timeline (throughput, errors, latency per
	// step), for the HTML report.
	Series []Interval `json:"-"`
	// Trace is the leader's per-stage breakdown of sampled sends (bench
	// produce --trace), or nil.
	Trace *Breakdown `json:"trace,omitempty"`
}

// JSON returns the result as one JSON line.
func (r Result) JSON() string {
	b, _ := json.Marshal(r)
	return string(b)
}

func (r Result) String() string {
	s := fmt.Sprintf("%s: %d messages of %d B in %.1fs: %.0f msgs/s, %.1f MB/s", r.Mode, r.Messages, r.Size, r.Seconds, r.MsgsPerSec, r.MBPerSec)
	if r.P50 > 0 {
		s += fmt.Sprintf("; latency p50 %.3f ms, p90 %.3f, p99 %.3f, p99.9 %.3f, max %.3f", r.P50, r.P90, r.P99, r.P999, r.Max)
	}
	if r.Duplicates > 0 || r.Consumers > 0 {
		s += fmt.Sprintf("; %d duplicates", r.Duplicates)
	}
	if r.Queues > 1 && r.QueueMax > 0 {
		s += fmt.Sprintf("; %d to %d messages per queue", r.QueueMin, r.QueueMax)
	}
	if r.Topics > 1 && r.CreateSeconds > 0 {
		s += fmt.Sprintf("; topics created at %.0f/s (%d in %.2fs)", float64(r.Topics)/r.CreateSeconds, r.Topics, r.CreateSeconds)
	}
	if r.Errors > 0 {
		s += fmt.Sprintf("; %d errors (first: %s)", r.Errors, r.FirstErr)
	}
	return s
}

// sample is one acknowledged send: when its answer came (since the run
// started) and how long it took, in microseconds (up to 71 minutes), and
// how many messages it carried. 12 bytes, as a run keeps one per send.
type sample struct {
	atUS, dUS, msgs uint32
}

func (s sample) at() time.Duration { return time.Duration(s.atUS) * time.Microsecond }
func (s sample) d() time.Duration  { return time.Duration(s.dUS) * time.Microsecond }

// micros converts d to whole microseconds, saturating at the uint32 range.
func micros(d time.Duration) uint32 { return uint32(min(max(d.Microseconds(), 0), math.MaxUint32)) }

// recorder keeps a run's timeline: every answered send (or pull) and the
// time of every failed one, relative to the run's start.
type recorder struct {
	start    time.Time
	mu       sync.Mutex
	s        []sample
	failedAt []time.Duration
}

func newRecorder(start time.Time) *recorder { return &recorder{start: start} }

func (l *recorder) add(d time.Duration, msgs int) {
	at := time.Since(l.start)
	l.mu.Lock()
	l.s = append(l.s, sample{atUS: micros(at), dUS: micros(d), msgs: uint32(msgs)})
	l.mu.Unlock()
}

func (l *recorder) failed() {
	at := time.Since(l.start)
	l.mu.Lock()
	l.failedAt = append(l.failedAt, at)
	l.mu.Unlock()
}

func (l *recorder) fill(r *Result) {
	l.mu.Lock()
	d := make([]time.Duration, len(l.s))
	for i, s := range l.s {
		d[i] = s.d()
	}
	l.mu.Unlock()
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	r.P50, r.P90, r.P99, r.P999, r.Max = quantile(d, 0.5), quantile(d, 0.9), quantile(d, 0.99), quantile(d, 0.999), quantile(d, 1)
}

// quantile returns the q-quantile of sorted d in milliseconds.
func quantile(sorted []time.Duration, q float64) float64 {
	return float64(sorted[int(q*float64(len(sorted)-1))].Microseconds()) / 1000
}

// counters counts a run's messages and failures as they happen; rec, if
// set, also records when each failure happened.
type counters struct {
	msgs, errs atomic.Int64
	firstErr   atomic.Pointer[string]
	rec        *recorder
}

func (c *counters) fail(err error) {
	c.errs.Add(1)
	s := err.Error()
	c.firstErr.CompareAndSwap(nil, &s)
	if c.rec != nil {
		c.rec.failed()
	}
}

// progress prints a line per second until stop is closed.
func progress(w io.Writer, what string, c *counters, start time.Time, stop <-chan struct{}) {
	if w == nil {
		return
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	last := int64(0)
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			n := c.msgs.Load()
			fmt.Fprintf(w, "%s %5.1fs  %9d msgs  %8d msgs/s  errors %d\n", what, time.Since(start).Seconds(), n, n-last, c.errs.Load())
			last = n
		}
	}
}

// Produce runs a produce benchmark.
func Produce(ctx context.Context, c *client.Client, cfg ProduceConfig) (Result, error) {
	if cfg.Queues <= 0 {
		cfg.Queues = 4
	}
	cfg.Topics = max(cfg.Topics, 1)
	if cfg.Window <= 0 {
		cfg.Window = 1
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 1
	}
	if cfg.Producers <= 0 {
		cfg.Producers = 1
	}
	topics := TopicNames(cfg.Topic, cfg.Topics)
	created, err := createTopics(ctx, c, topics, cfg.Queues, cfg.Progress)
	if err != nil {
		return Result{}, err
	}
	// perQueue counts the messages acknowledged to each queue, by its
	// place in the rotation (slotOf).
	nq := cfg.Topics * cfg.Queues
	perQueue := make([]atomic.Int64, nq)
	body := make([]byte, cfg.Size)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	var (
		wg    sync.WaitGroup
		stop  = make(chan struct{})
		start = time.Now()
		lat   = newRecorder(start)
		cnt   = counters{rec: lat}
	)
	end := start.Add(cfg.Duration)
	var issued atomic.Int64
	// reserve takes up to n messages of the run's Messages and returns
	// how many it got (n without a limit, 0 once it is spent).
	reserve := func(n int) int {
		if cfg.Messages <= 0 {
			return n
		}
		over := issued.Add(int64(n)) - cfg.Messages
		return n - int(min(max(over, 0), int64(n)))
	}
	var grpcAddr string
	if cfg.GRPC != "" {
		if grpcAddr, err = grpcLeader(ctx, cfg.GRPC, cfg.GRPCClient, topics[0]); err != nil {
			return Result{}, err
		}
		start = time.Now()
		lat = newRecorder(start)
		cnt = counters{rec: lat}
		end = start.Add(cfg.Duration)
	}
	var grpcConns []grpc.ClientConnInterface
	if cfg.GRPC != "" {
		for range min(max(cfg.GRPCConns, 1), cfg.Producers) {
			cc, closeCC, err := grpcDial(ctx, grpcAddr, cfg.GRPCClient, true)
			if err != nil {
				return Result{}, err
			}
			defer closeCC()
			grpcConns = append(grpcConns, cc)
		}
	}
	go progress(cfg.Progress, "produce", &cnt, start, stop)
	for p := 0; p < cfg.Producers; p++ {
		if cfg.GRPC != "" {
			wg.Add(1)
			go func(p int) {
				defer wg.Done()
				grpcProducer(ctx, cfg, grpcConns[p%len(grpcConns)], topics, p, body, reserve, end, &cnt, lat)
			}(p)
			continue
		}
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			pr := c.NewProducer(client.ProducerOptions{Group: "bench", Window: cfg.Window, AutoBatch: cfg.AutoBatch})
			slots := make(chan struct{}, cfg.Window)
			var inflight sync.WaitGroup
			// Each producer starts at a queue of its own and then takes
			// every queue in turn.
			next := p % nq
			for time.Now().Before(end) && ctx.Err() == nil {
				n := reserve(cfg.Batch)
				if n == 0 {
					break
				}
				slot := next
				next = (next + 1) % nq
				t, q := slotOf(slot, cfg.Topics)
				topic, acked := topics[t], &perQueue[slot]
				t0 := time.Now()
				switch {
				case cfg.Batch > 1:
					ms := make([]*client.Message, n)
					for k := range ms {
						ms[k] = &client.Message{Topic: topic, QueueID: q, Body: body}
					}
					if cfg.Window > 1 {
						// Pipelined batches: one goroutine per in-flight batch.
						sendBatchAsync(ctx, pr, ms, &cnt, lat, acked, slots, &inflight)
						continue
					}
					if _, err := pr.SendBatch(ctx, ms); err != nil {
						cnt.fail(err)
						continue
					}
					cnt.msgs.Add(int64(len(ms)))
					acked.Add(int64(len(ms)))
					lat.add(time.Since(t0), len(ms))
				case cfg.Window > 1:
					err := pr.SendAsync(ctx, &client.Message{Topic: topic, QueueID: q, Body: body}, func(_ client.SendResult, err error) {
						if err != nil {
							cnt.fail(err)
							return
						}
						cnt.msgs.Add(1)
						acked.Add(1)
						lat.add(time.Since(t0), 1)
					})
					if err != nil {
						cnt.fail(err)
					}
				default:
					if _, err := pr.Send(ctx, &client.Message{Topic: topic, QueueID: q, Body: body}); err != nil {
						cnt.fail(err)
						continue
					}
					cnt.msgs.Add(1)
					acked.Add(1)
					lat.add(time.Since(t0), 1)
				}
			}
			inflight.Wait()
			fctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_ = pr.Flush(fctx)
			cancel()
		}(p)
	}
	wg.Wait()
	close(stop)
	el := time.Since(start).Seconds()
	r := Result{Mode: mode(cfg), Messages: cnt.msgs.Load(), Errors: cnt.errs.Load(), Seconds: el, Size: cfg.Size,
		Window: cfg.Window, Batch: cfg.Batch, Producers: cfg.Producers, AutoBatch: cfg.AutoBatch,
		Topics: cfg.Topics, Queues: nq, CreateSeconds: created.Seconds()}
	r.QueueMin, r.QueueMax = math.MaxInt64, 0
	for i := range perQueue {
		n := perQueue[i].Load()
		r.QueueMin, r.QueueMax = min(r.QueueMin, n), max(r.QueueMax, n)
	}
	r.MsgsPerSec = float64(r.Messages) / el
	r.MBPerSec = r.MsgsPerSec * float64(cfg.Size) / 1e6
	if p := cnt.firstErr.Load(); p != nil {
		r.FirstErr = *p
	}
	lat.fill(&r)
	r.Series = timeline(lat, time.Since(start))
	if r.Messages == 0 {
		return r, errors.New("bench: no send succeeded: " + r.FirstErr)
	}
	return r, nil
}

func mode(cfg ProduceConfig) string {
	var m string
	switch {
	case cfg.Batch > 1:
		m = fmt.Sprintf("produce batches of %d, window %d", cfg.Batch, cfg.Window)
	case cfg.Window > 1 && cfg.AutoBatch:
		m = fmt.Sprintf("produce pipelined, auto-batched, window %d x %d producers", cfg.Window, cfg.Producers)
	case cfg.Window > 1:
		m = fmt.Sprintf("produce pipelined, window %d x %d producers", cfg.Window, cfg.Producers)
	default:
		m = fmt.Sprintf("produce one at a time x %d producers", cfg.Producers)
	}
	if cfg.GRPC != "" {
		m = "grpc (" + grpcKind(cfg.GRPCClient) + ") " + m
	}
	return m + ", " + layout(cfg.Topics, cfg.Topics*cfg.Queues)
}

// sendBatchAsync sends one batch in its own goroutine, holding one of the
// window's slots while it is in flight; acked counts its queue's messages.
func sendBatchAsync(ctx context.Context, pr *client.Producer, ms []*client.Message, cnt *counters, lat *recorder, acked *atomic.Int64, slots chan struct{}, wg *sync.WaitGroup) {
	slots <- struct{}{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer func() { <-slots }()
		t0 := time.Now()
		if _, err := pr.SendBatch(ctx, ms); err != nil {
			cnt.fail(err)
			return
		}
		cnt.msgs.Add(int64(len(ms)))
		acked.Add(int64(len(ms)))
		lat.add(time.Since(t0), len(ms))
	}()
}
