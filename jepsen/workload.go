package jepsen

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/jepsen/history"
)

// Workloads.
const (
	// WorkloadQueue: producers send unique values; one consumer per queue
	// polls (from random nodes), commits offsets and resumes from them.
	WorkloadQueue = "queue"
	// WorkloadLog: producers send; readers read random offsets of random
	// queues from random nodes.
	WorkloadLog = "log"
	// WorkloadOffsets: committers commit growing offsets and fetch them
	// back, while producers send.
	WorkloadOffsets = "offsets"
	// WorkloadRetries: producers repeat every indeterminate send with the
	// same UNIQ_KEY until it succeeds or fails definitely, and repeat one
	// acknowledged send in ten as if its answer had been lost; the broker
	// must store each value once.
	WorkloadRetries = "retries"
	// WorkloadBatched: the log workload with its producers sharing one
	// auto-batching producer (client.ProducerOptions.AutoBatch), so that
	// concurrent sends travel as packed batches: every message's own
	// offset, loss or duplication is checked as for single sends.
	WorkloadBatched = "batched"
	// WorkloadGroup: producers send while two consumer groups of push
	// consumers (one concurrent, one orderly) consume, their members
	// joining, leaving and being killed (see groupwork.go).
	WorkloadGroup = "group"
	// WorkloadDelay: beside the queue workload's clients (two producers),
	// producers send delayed and timer messages to DelayTopic and pull
	// consumers read it (see delaywork.go).
	WorkloadDelay = "delay"
	// WorkloadTransaction: beside the queue workload's clients (two
	// producers), transaction producers commit, roll back or leave to
	// their check-backs transactional messages to TxnTopic and pull
	// consumers read it (see txnwork.go).
	WorkloadTransaction = "transaction"
	// WorkloadRetry: beside the queue workload's clients (two producers),
	// push consumers fail chosen values a planned number of times: each
	// must be consumed after exactly those failures, or end in the
	// dead-letter queue (see retrywork.go).
	WorkloadRetry = "retry"
	// WorkloadPop: beside the queue workload's clients (two producers),
	// SimpleConsumers of a concurrent and an orderly group consume a topic
	// by pop: slow ones let the invisible time pass, others extend it, some
	// are killed mid-batch (see popwork.go).
	WorkloadPop = "pop"
)

// batchedWorkers is how many producers share the batched workload's
// producer.
const batchedWorkers = 8

// Workloads lists the workload names.
func Workloads() []string {
	return []string{WorkloadQueue, WorkloadLog, WorkloadOffsets, WorkloadRetries, WorkloadBatched, WorkloadGroup, WorkloadDelay, WorkloadTransaction, WorkloadRetry, WorkloadPop}
}

const (
	topic       = "jepsen"
	group       = "jepsen-consumers"
	maxAttempts = 5
)

// workload runs the clients of one run.
type workload struct {
	name    string
	rec     *recorder
	addrs   []string // client addresses, node i at addrs[i-1]
	queues  int
	tokens  <-chan struct{}
	seed    int64
	timeout time.Duration
	log     *slog.Logger
	// due is when (run time, ns) the last message held back by the broker
	// (a delayed message) is due.
	due atomic.Int64
}

// limiter hands out rate tokens per second until ctx ends.
func limiter(ctx context.Context, rate float64) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		if rate <= 0 {
			rate = 100
		}
		interval := time.Duration(float64(time.Second) / rate)
		per := 1
		for interval < time.Millisecond {
			interval *= 2
			per *= 2
		}
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			for i := 0; i < per; i++ {
				select {
				case ch <- struct{}{}:
				case <-ctx.Done():
					return
				default: // nobody ready: drop the token (no bursts)
				}
			}
		}
	}()
	return ch
}

func (w *workload) token(ctx context.Context) bool {
	select {
	case _, ok := <-w.tokens:
		return ok
	case <-ctx.Done():
		return false
	}
}

func (w *workload) newClient() (*client.Client, error) {
	return client.New(client.Options{Addrs: w.addrs, RequestTimeout: w.timeout})
}

// run starts every client of the workload and returns when ctx ends and
// they have finished their last operation.
func (w *workload) run(ctx context.Context) error {
	var wg sync.WaitGroup
	errc := make(chan error, 32)
	start := func(f func(ctx context.Context, c *client.Client, rng *rand.Rand) error, k int) {
		c, err := w.newClient()
		if err != nil {
			errc <- err
			return
		}
		rng := rand.New(rand.NewPCG(uint64(w.seed), uint64(k)+1))
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			if err := f(ctx, c, rng); err != nil {
				errc <- err
			}
		}()
	}
	producers := 4
	if w.name == WorkloadDelay || w.name == WorkloadTransaction || w.name == WorkloadRetry || w.name == WorkloadPop {
		producers = 2 // the rest of the rate goes to the workload's own clients
	}
	k := 0
	var groups *groupState
	if w.name == WorkloadGroup {
		groups = &groupState{w: w, acked: map[string]bool{}, seen: map[string]map[string]bool{ConcurrentGroup: {}, OrderlyGroup: {}}}
	}
	if w.name == WorkloadBatched {
		start(w.batchedProducers, k)
		k++
	} else {
		for i := 0; i < producers; i++ {
			worker := i
			retry := w.name == WorkloadRetries
			start(func(ctx context.Context, c *client.Client, rng *rand.Rand) error {
				p := c.NewProducer(client.ProducerOptions{Group: "jepsen-producers", MaxRetries: -1})
				return w.producer(ctx, rng, worker, retry, func() bool { return w.token(ctx) }, func(m *client.Message) (client.SendResult, error) {
					// The send's own deadline, not the run's: an operation
					// in flight when the run ends completes normally.
					sctx, cancel := context.WithTimeout(context.Background(), w.timeout+time.Second)
					defer cancel()
					res, err := p.Send(sctx, m)
					if err == nil && groups != nil {
						groups.ack(string(m.Body))
					}
					return res, err
				})
			}, k)
			k++
		}
	}
	switch w.name {
	case WorkloadQueue, WorkloadRetries, WorkloadDelay, WorkloadTransaction, WorkloadRetry, WorkloadPop:
		for q := 0; q < w.queues; q++ {
			queue := q
			start(func(ctx context.Context, c *client.Client, rng *rand.Rand) error {
				return w.consumer(ctx, c, rng, queue)
			}, k)
			k++
		}
		if w.name == WorkloadDelay {
			for i := range delayProducers {
				start(w.delayProducer(i), k)
				k++
			}
			for q := range w.queues {
				start(w.topicConsumer(DelayTopic, delayGroup, q), k)
				k++
			}
		}
		if w.name == WorkloadTransaction {
			s := newTxnState(w)
			kk := k
			k += w.queues
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := s.runTxn(ctx, start, kk); err != nil {
					errc <- err
				}
			}()
		}
		if w.name == WorkloadRetry {
			s := newRetryState(w)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := s.runRetry(ctx); err != nil {
					errc <- err
				}
			}()
		}
		if w.name == WorkloadPop {
			s := newPopState(w)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := s.runPop(ctx); err != nil {
					errc <- err
				}
			}()
		}
	case WorkloadLog, WorkloadBatched:
		for i := 0; i < 2; i++ {
			start(w.reader, k)
			k++
		}
	case WorkloadGroup:
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := groups.runGroups(ctx); err != nil {
				errc <- err
			}
		}()
	case WorkloadOffsets:
		for q := 0; q < w.queues; q++ {
			queue := q
			start(func(ctx context.Context, c *client.Client, rng *rand.Rand) error {
				return w.committer(ctx, c, rng, queue)
			}, k)
			k++
		}
	default:
		return fmt.Errorf("jepsen: unknown workload %q (known: %v)", w.name, Workloads())
	}
	wg.Wait()
	close(errc)
	return errors.Join(collect(errc)...)
}

func collect(ch <-chan error) []error {
	var out []error
	for err := range ch {
		out = append(out, err)
	}
	return out
}

// outcome classifies a client error.
func outcome(err error) history.Outcome {
	switch {
	case err == nil:
		return history.OK
	case errors.Is(err, client.ErrIndeterminate), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return history.Info
	}
	return history.Fail
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	s := err.Error()
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

// batchedProducers runs batchedWorkers producers on one auto-batching
// producer with one request in flight. Each rate token releases all of
// them at once, so that one send goes out alone and the others are packed
// behind it. Their context is shared (packs are per context) and not the
// run's, so that an operation in flight when the run ends completes; the
// client's request timeout bounds each attempt.
func (w *workload) batchedProducers(ctx context.Context, c *client.Client, rng *rand.Rand) error {
	p := c.NewProducer(client.ProducerOptions{Group: "jepsen-producers", MaxRetries: -1, AutoBatch: true, AutoBatchRequests: 1})
	type result struct {
		res client.SendResult
		err error
	}
	var (
		wg              sync.WaitGroup
		inflight, sends atomic.Int64
		packed          atomic.Int64 // sends made while another was in flight
	)
	gates := make([]chan struct{}, batchedWorkers)
	for i := range gates {
		gates[i] = make(chan struct{})
	}
	go func() {
		defer func() {
			for _, g := range gates {
				close(g)
			}
		}()
		for w.token(ctx) {
			for _, g := range gates {
				select {
				case g <- struct{}{}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	for i := range batchedWorkers {
		wrng := rand.New(rand.NewPCG(rng.Uint64(), uint64(i)))
		gate := gates[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = w.producer(ctx, wrng, i, false, func() bool { _, ok := <-gate; return ok }, func(m *client.Message) (client.SendResult, error) {
				done := make(chan result, 1)
				sends.Add(1)
				if inflight.Add(1) > 1 {
					packed.Add(1)
				}
				defer inflight.Add(-1)
				if err := p.SendAsync(context.Background(), m, func(r client.SendResult, err error) { done <- result{r, err} }); err != nil {
					return client.SendResult{}, err
				}
				r := <-done
				return r.res, r.err
			})
		}()
	}
	wg.Wait()
	w.log.Info("jepsen: batched producers done", "sends", sends.Load(), "madeWhileAnotherInFlight", packed.Load())
	return nil
}

// producer sends unique values w<worker>-<seq> to random queues with send.
func (w *workload) producer(ctx context.Context, rng *rand.Rand, worker int, retry bool, token func() bool, send func(*client.Message) (client.SendResult, error)) error {
	proc := w.rec.process()
	for seq := 0; token(); seq++ {
		value := fmt.Sprintf("w%d-%d", worker, seq)
		queue := rng.IntN(w.queues)
		for attempt := 1; ; attempt++ {
			o := history.Op{Process: proc, Kind: history.Send, Queue: queue, Value: value, Invoke: w.rec.now()}
			if retry {
				o.Attempt = attempt
			}
			m := &client.Message{Topic: topic, QueueID: int32(queue), Body: []byte(value),
				Properties: map[string]string{"UNIQ_KEY": value}}
			res, err := send(m)
			o.Complete, o.Outcome, o.Error = w.rec.now(), outcome(err), errString(err)
			if err == nil {
				o.Offset = res.QueueOffset
				if int(res.QueueID) != queue {
					o.Outcome, o.Error = history.Fail, fmt.Sprintf("stored in queue %d, asked %d", res.QueueID, queue)
				}
			}
			w.rec.op(o)
			if o.Outcome == history.Info {
				proc = w.rec.process()
			}
			// In the retries workload one acknowledged send in ten is sent
			// again as if its answer had been lost: the broker must answer
			// with the original offset, not store it twice.
			lostAck := retry && o.Outcome == history.OK && attempt == 1 && rng.IntN(10) == 0
			if !lostAck && (!retry || o.Outcome != history.Info || attempt >= maxAttempts || ctx.Err() != nil) {
				break
			}
			time.Sleep(time.Duration(50+rng.IntN(100)) * time.Millisecond)
		}
	}
	return nil
}

// node picks a random node's address (or "" for the leader, one time in
// four).
func (w *workload) node(rng *rand.Rand) (string, int) {
	i := rng.IntN(len(w.addrs) + 1)
	if i == len(w.addrs) {
		return "", 0
	}
	return w.addrs[i], i + 1
}

// poll pulls one batch. group is set for a consumer following its offsets
// and empty for random reads.
func (w *workload) poll(ctx context.Context, pc *client.PullConsumer, proc int, group, addr string, node, queue int, from int64) history.Op {
	o := history.Op{Process: proc, Kind: history.Poll, Queue: queue, Group: group, Offset: from, Node: node, Invoke: w.rec.now()}
	pctx, cancel := context.WithTimeout(context.Background(), w.timeout+time.Second)
	res, err := pc.PullWith(pctx, client.PullRequest{Addr: addr, Topic: topic, Queue: int32(queue), Offset: from, Max: 32})
	cancel()
	o.Complete, o.Outcome, o.Error = w.rec.now(), outcome(err), errString(err)
	if err != nil {
		// A read that failed has no effect: it is a definite failure.
		o.Outcome = history.Fail
	} else {
		o.Next = res.NextBeginOffset
		for _, m := range res.Messages {
			o.Msgs = append(o.Msgs, history.Msg{Offset: m.QueueOffset, Value: string(m.Body)})
		}
	}
	w.rec.op(o)
	return o
}

func (w *workload) fetch(ctx context.Context, pc *client.PullConsumer, proc, queue int) history.Op {
	o := history.Op{Process: proc, Kind: history.Fetch, Queue: queue, Group: group, Invoke: w.rec.now()}
	fctx, cancel := context.WithTimeout(context.Background(), w.timeout+time.Second)
	off, found, err := pc.FetchOffset(fctx, topic, int32(queue))
	cancel()
	o.Complete, o.Outcome, o.Error = w.rec.now(), outcome(err), errString(err)
	if err != nil {
		o.Outcome = history.Fail // a read
	} else if found {
		o.Offset = off
	} else {
		o.Offset = -1
	}
	w.rec.op(o)
	return o
}

func (w *workload) commit(ctx context.Context, pc *client.PullConsumer, proc, queue int, off int64) history.Op {
	o := history.Op{Process: proc, Kind: history.Commit, Queue: queue, Group: group, Offset: off, Invoke: w.rec.now()}
	cctx, cancel := context.WithTimeout(context.Background(), w.timeout+time.Second)
	err := pc.CommitOffset(cctx, topic, int32(queue), off)
	cancel()
	o.Complete, o.Outcome, o.Error = w.rec.now(), outcome(err), errString(err)
	w.rec.op(o)
	return o
}

// consumer is one consumer of one queue: it fetches the committed offset,
// polls from there following NextBeginOffset, commits every few polls, and
// now and then starts a new session from the committed offset.
func (w *workload) consumer(ctx context.Context, c *client.Client, rng *rand.Rand, queue int) error {
	pc := c.NewPullConsumer(group)
	proc := w.rec.process()
	for ctx.Err() == nil {
		f := w.fetch(ctx, pc, proc, queue)
		if f.Outcome != history.OK {
			if !w.token(ctx) {
				return nil
			}
			continue
		}
		pos := max(f.Offset, 0)
		for polls := 0; polls < 20+rng.IntN(20); polls++ {
			if !w.token(ctx) {
				return nil
			}
			addr, node := w.node(rng)
			p := w.poll(ctx, pc, proc, group, addr, node, queue, pos)
			if p.Outcome == history.OK {
				// Follow the broker, as a RocketMQ consumer does, including
				// an OFFSET_MOVED answer that sends it back.
				pos = p.Next
			}
			if polls%4 == 3 {
				if cm := w.commit(ctx, pc, proc, queue, pos); cm.Outcome == history.Info {
					proc = w.rec.process()
					break // a new session: resume from the committed offset
				}
			}
		}
	}
	return nil
}

// reader reads random offsets of random queues from random nodes.
func (w *workload) reader(ctx context.Context, c *client.Client, rng *rand.Rand) error {
	pc := c.NewPullConsumer(group)
	proc := w.rec.process()
	high := make([]int64, w.queues)
	for w.token(ctx) {
		q := rng.IntN(w.queues)
		from := int64(0)
		if high[q] > 0 {
			from = rng.Int64N(high[q] + 1)
		}
		addr, node := w.node(rng)
		p := w.poll(ctx, pc, proc, "", addr, node, q, from)
		if p.Outcome == history.OK && p.Next > high[q] {
			high[q] = p.Next
		}
	}
	return nil
}

// committer commits growing offsets of one queue and fetches them back.
func (w *workload) committer(ctx context.Context, c *client.Client, rng *rand.Rand, queue int) error {
	pc := c.NewPullConsumer(group)
	proc := w.rec.process()
	var next int64
	for w.token(ctx) {
		if rng.IntN(2) == 0 {
			w.fetch(ctx, pc, proc, queue)
			continue
		}
		next += int64(1 + rng.IntN(5))
		if cm := w.commit(ctx, pc, proc, queue, next); cm.Outcome == history.Info {
			proc = w.rec.process()
		}
	}
	return nil
}
