package jepsen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/jepsen/history"
	"github.com/raftmq/raftmq/message"
)

// The pop workload: beside two producers and the queue consumers of the
// main topic, two producers send unique values "q<worker>-<seq>" to
// PopTopic (history.PopSend), and SimpleConsumers of two groups receive
// them by pop: popConcurrent consumers of PopGroup and popOrderly of the
// orderly (FIFO) PopFIFOGroup. Each Receive takes up to popMaxBatch
// messages for popInvisible (history.PopDeliver, one op per message); the
// consumer then, chosen per batch:
//
//   - acks each message (history.PopAck), most of the time;
//   - is slow: waits past the invisible time before acking, so the
//     messages become visible again and the late acks are refused;
//   - extends: waits a while, changes each message's invisible time to
//     popInvisible from then on (history.PopChange), and acks;
//   - is killed mid-batch: acks a prefix of the batch, then its client is
//     closed with the rest unacked (history.PopKill) and a new consumer
//     takes its place.
//
// After the run the consumers go on until every acknowledged value was
// acked by each group (or popCatchUp passes); PopTopic and the groups'
// dead-letter topics are drained. The pop checker judges the result.

// PopTopic, PopGroup and PopFIFOGroup are the pop workload's topic and
// consumer groups.
const (
	PopTopic     = "jepsen-pop"
	PopGroup     = "jepsen-pop-cg"
	PopFIFOGroup = "jepsen-pop-fifo"
)

const (
	popProducers  = 2
	popConcurrent = 4
	popOrderly    = 3
	popMaxBatch   = 32
	popInvisible  = 3 * time.Second
	popAwait      = time.Second
	// popCatchUp bounds the wait after the run for every value to be
	// acked: a killed consumer's messages come back after popInvisible.
	popCatchUp = 30 * time.Second
)

// popGroups lists the pop workload's groups, and whether each is orderly.
var popGroups = []struct {
	name      string
	orderly   bool
	consumers int
}{{PopGroup, false, popConcurrent}, {PopFIFOGroup, true, popOrderly}}

// popState is what the pop workload's goroutines share.
type popState struct {
	w     *workload
	mu    sync.Mutex
	acked map[string]bool            // values whose send was acknowledged
	done  map[string]map[string]bool // group -> values acked (ok or maybe)
	batch int                        // receives so far, naming batches
}

func newPopState(w *workload) *popState {
	s := &popState{w: w, acked: map[string]bool{}, done: map[string]map[string]bool{}}
	for _, g := range popGroups {
		s.done[g.name] = map[string]bool{}
	}
	return s
}

// open counts, over the groups, the acknowledged values not acked yet.
func (s *popState) open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for v := range s.acked {
		for _, g := range popGroups {
			if !s.done[g.name][v] {
				n++
			}
		}
	}
	return n
}

// runPop runs the producers and consumers until ctx ends, then lets the
// consumers catch up and stops them.
func (s *popState) runPop(ctx context.Context) error {
	w := s.w
	var pwg, cwg sync.WaitGroup
	// The consumers stop when every value is acked or the catch-up ends.
	cctx, ccancel := context.WithCancel(context.Background())
	defer ccancel()
	k := 0
	for _, g := range popGroups {
		for range g.consumers {
			rng := rand.New(rand.NewPCG(uint64(w.seed), uint64(4000+k)))
			k++
			cwg.Add(1)
			go func() {
				defer cwg.Done()
				s.consumer(cctx, rng, g.name, g.orderly)
			}()
		}
	}
	for i := range popProducers {
		c, err := w.newClient()
		if err != nil {
			ccancel()
			cwg.Wait()
			return err
		}
		rng := rand.New(rand.NewPCG(uint64(w.seed), uint64(5000+i)))
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			defer c.Close()
			s.producer(ctx, c, rng, i)
		}()
	}
	pwg.Wait()
	<-ctx.Done()
	deadline := time.Now().Add(popCatchUp)
	for s.open() > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if n := s.open(); n > 0 {
		w.log.Warn("jepsen: pop workload: values not acked by every group after the catch-up", "values", n)
	}
	ccancel()
	cwg.Wait()
	return nil
}

// producer sends values to random queues of PopTopic, repeating an
// indeterminate send with the same UNIQ_KEY.
func (s *popState) producer(ctx context.Context, c *client.Client, rng *rand.Rand, worker int) {
	w := s.w
	p := c.NewProducer(client.ProducerOptions{Group: "jepsen-pop-producers", MaxRetries: -1})
	proc := w.rec.process()
	for seq := 0; w.token(ctx); seq++ {
		value := fmt.Sprintf("q%d-%d", worker, seq)
		queue := rng.IntN(w.queues)
		for attempt := 1; ; attempt++ {
			o := history.Op{Process: proc, Kind: history.PopSend, Topic: PopTopic, Queue: queue, Value: value, Attempt: attempt, Invoke: w.rec.now()}
			m := &client.Message{Topic: PopTopic, QueueID: int32(queue), Body: []byte(value),
				Properties: map[string]string{message.PropertyUniqKey: value}}
			sctx, cancel := context.WithTimeout(context.Background(), w.timeout+time.Second)
			res, err := p.Send(sctx, m)
			cancel()
			o.Complete, o.Outcome, o.Error = w.rec.now(), outcome(err), errString(err)
			if err == nil {
				o.Offset = res.QueueOffset
				s.mu.Lock()
				s.acked[value] = true
				s.mu.Unlock()
			}
			w.rec.op(o)
			if o.Outcome == history.Info {
				proc = w.rec.process()
			}
			if o.Outcome != history.Info || attempt >= maxAttempts || ctx.Err() != nil {
				break
			}
			time.Sleep(time.Duration(50+rng.IntN(100)) * time.Millisecond)
		}
	}
}

// popMember is one SimpleConsumer with its own client.
type popMember struct {
	c    *client.Client
	sc   *client.SimpleConsumer
	proc int
}

// start makes a consumer of group and announces it, retrying while the
// cluster is faulty; nil once ctx ended.
func (s *popState) start(ctx context.Context, group string, orderly bool) *popMember {
	w := s.w
	for ctx.Err() == nil {
		c, err := w.newClient()
		if err != nil {
			w.log.Warn("jepsen: pop consumer client", "err", err)
			time.Sleep(time.Second)
			continue
		}
		sc := c.NewSimpleConsumer(group, PopTopic, client.SimpleConsumerOptions{Await: popAwait, Order: orderly})
		o := history.Op{Process: w.rec.process(), Kind: history.PopJoin, Group: group, Orderly: orderly, Invoke: w.rec.now()}
		sctx, cancel := context.WithTimeout(ctx, w.timeout+time.Second)
		err = sc.Start(sctx)
		cancel()
		o.Complete, o.Outcome, o.Error = w.rec.now(), outcome(err), errString(err)
		w.rec.op(o)
		if err == nil {
			return &popMember{c: c, sc: sc, proc: o.Process}
		}
		c.Close()
		time.Sleep(200 * time.Millisecond)
	}
	return nil
}

// consumer receives from group until ctx ends, replacing itself when it
// is killed.
func (s *popState) consumer(ctx context.Context, rng *rand.Rand, group string, orderly bool) {
	w := s.w
	m := s.start(ctx, group, orderly)
	defer func() {
		if m != nil {
			m.c.Close()
		}
	}()
	for m != nil && ctx.Err() == nil {
		s.mu.Lock()
		s.batch++
		batch := fmt.Sprintf("%s#%d", group, s.batch)
		s.mu.Unlock()
		max := 1 + rng.IntN(popMaxBatch)
		invoke := w.rec.now()
		rctx, cancel := context.WithTimeout(ctx, w.timeout+popAwait+time.Second)
		msgs, err := m.sc.Receive(rctx, max, popInvisible)
		cancel()
		complete := w.rec.now()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if outcome(err) == history.Info {
				m.proc = w.rec.process()
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		var ds []history.Op
		for i, msg := range msgs {
			d := history.Op{Process: m.proc, Kind: history.PopDeliver, Group: group, Topic: msg.Topic, Queue: int(msg.QueueID),
				Offset: msg.QueueOffset, Value: string(msg.Body), Reconsume: int(msg.Attempt) - 1, InvisibleMs: popInvisible.Milliseconds(),
				Handle: fmt.Sprintf("%s/%d", batch, i), Orderly: orderly, Invoke: invoke, Complete: complete, Outcome: history.OK}
			w.rec.op(d)
			ds = append(ds, d)
		}
		if len(msgs) == 0 {
			continue
		}
		switch r := rng.IntN(40); {
		case r < 2: // slow: past the invisible time
			time.Sleep(popInvisible + time.Duration(500+rng.IntN(1000))*time.Millisecond)
			s.ackAll(m, group, msgs, ds, len(msgs))
		case r < 6: // extend, then ack
			time.Sleep(time.Duration(500+rng.IntN(1500)) * time.Millisecond)
			for i, msg := range msgs {
				s.change(m, group, msg, ds[i])
			}
			time.Sleep(time.Duration(rng.IntN(1500)) * time.Millisecond)
			s.ackAll(m, group, msgs, ds, len(msgs))
		case r < 8: // killed mid-batch
			n := rng.IntN(len(msgs))
			s.ackAll(m, group, msgs, ds, n)
			w.rec.op(history.Op{Process: m.proc, Kind: history.PopKill, Group: group, Handle: batch, Value: fmt.Sprint(len(msgs) - n),
				Orderly: orderly, Invoke: w.rec.now(), Complete: w.rec.now(), Outcome: history.Info})
			m.c.Close()
			m = s.start(ctx, group, orderly)
		default:
			s.ackAll(m, group, msgs, ds, len(msgs))
		}
	}
}

// ackAll acks the first n messages, in order: every other one as a batch
// ack of one message (BATCH_ACK_MESSAGE, which a leader takes on its
// connection's reader), the others with ACK_MESSAGE.
func (s *popState) ackAll(m *popMember, group string, msgs []*client.ReceivedMessage, ds []history.Op, n int) {
	w := s.w
	for i := range n {
		msg, d := msgs[i], ds[i]
		o := history.Op{Process: m.proc, Kind: history.PopAck, Group: group, Topic: d.Topic, Queue: d.Queue, Offset: d.Offset, Value: d.Value,
			Handle: d.Handle, Orderly: d.Orderly, Invoke: w.rec.now()}
		actx, cancel := context.WithTimeout(context.Background(), w.timeout+time.Second)
		var err error
		if i%2 == 1 {
			err = m.sc.AckBatch(actx, msgs[i:i+1])[0]
		} else {
			err = m.sc.Ack(actx, msg)
		}
		cancel()
		o.Complete, o.Outcome, o.Error = w.rec.now(), outcome(err), errString(err)
		w.rec.op(o)
		if o.Outcome != history.Fail {
			s.mu.Lock()
			s.done[group][d.Value] = true
			s.mu.Unlock()
		}
		if o.Outcome == history.Info {
			m.proc = w.rec.process()
		}
	}
}

// change hides msg for popInvisible from now on.
func (s *popState) change(m *popMember, group string, msg *client.ReceivedMessage, d history.Op) {
	w := s.w
	o := history.Op{Process: m.proc, Kind: history.PopChange, Group: group, Topic: d.Topic, Queue: d.Queue, Offset: d.Offset, Value: d.Value,
		Handle: d.Handle, Orderly: d.Orderly, InvisibleMs: popInvisible.Milliseconds(), Invoke: w.rec.now()}
	cctx, cancel := context.WithTimeout(context.Background(), w.timeout+time.Second)
	err := m.sc.ChangeInvisibleDuration(cctx, msg, popInvisible)
	cancel()
	o.Complete, o.Outcome, o.Error = w.rec.now(), outcome(err), errString(err)
	w.rec.op(o)
	if o.Outcome == history.Info {
		m.proc = w.rec.process()
	}
}
