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

// The retry workload: beside two producers and the queue consumers of the
// main topic, two producers send unique values "r<worker>-<seq>" to
// RetryTopic (repeating an indeterminate send with the same UNIQ_KEY),
// each with a planned number of failures (0: 50%, 1: 25%, 2: 25%), and two
// concurrent push consumers of RetryGroup (MaxReconsumeTimes
// retryMaxReconsume) consume it: a callback fails a value (ConsumeRetryLater)
// while the message's reconsume count is below the value's planned
// failures, and succeeds otherwise. A failed message goes back to the
// broker (CONSUMER_SEND_MSG_BACK), which redelivers it from %RETRY%group
// after delay level 3 (10 s: the client asks no level of its own), or,
// once it failed MaxReconsumeTimes times, moves it to %DLQ%group. So a
// value planned to fail at most MaxReconsumeTimes times is consumed after
// exactly that many failures, and one planned to fail more ends in the
// dead-letter queue. Sends are history.RetrySend ops (Failures, Group,
// MaxReconsume), callbacks history.RetryDeliver ops. After the run the
// consumers stay until every acknowledged value reached its end (or
// retryCatchUp passes); RetryTopic and the dead-letter topic are drained.
// The retry checker judges the result.

// RetryTopic and RetryGroup are the retry workload's topic and consumer
// group.
const (
	RetryTopic = "jepsen-retry"
	RetryGroup = "jepsen-retry-cg"
)

const (
	retryProducers    = 2
	retryConsumers    = 2
	retryMaxReconsume = 1
	// retryCatchUp bounds the wait after the run for every value to be
	// consumed or dead-lettered: one retry is 10 s away.
	retryCatchUp = 30 * time.Second
)

// retryDLQ is RetryGroup's dead-letter topic.
var retryDLQ = "%DLQ%" + RetryGroup

// retryState is what the retry workload's goroutines share.
type retryState struct {
	w        *workload
	mu       sync.Mutex
	failures map[string]int  // planned failures per value
	acked    map[string]bool // values acknowledged
	ended    map[string]bool // consumed, or failed for the last time
}

func newRetryState(w *workload) *retryState {
	return &retryState{w: w, failures: map[string]int{}, acked: map[string]bool{}, ended: map[string]bool{}}
}

// open counts the acknowledged values not at their end yet.
func (s *retryState) open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for v := range s.acked {
		if !s.ended[v] {
			n++
		}
	}
	return n
}

// runRetry runs the producers and consumers until ctx ends, then lets the
// consumers catch up and stops them.
func (s *retryState) runRetry(ctx context.Context) error {
	w := s.w
	var wg sync.WaitGroup
	type member struct {
		c *client.Client
		p *client.PushConsumer
	}
	var members []member
	defer func() {
		for _, m := range members {
			sctx, cancel := context.WithTimeout(context.Background(), 3*w.timeout)
			_ = m.p.Shutdown(sctx)
			cancel()
			m.c.Close()
		}
	}()
	for range retryConsumers {
		c, err := w.newClient()
		if err != nil {
			return err
		}
		proc := w.rec.process()
		p, err := c.NewPushConsumer(client.PushConsumerOptions{
			Group:             RetryGroup,
			Subscriptions:     map[string]client.Subscription{RetryTopic: {Type: client.ExpressionTag, Expression: "*"}},
			ConsumeFrom:       client.ConsumeFromFirstOffset,
			ConsumeBatchSize:  1,
			LongPoll:          2 * time.Second,
			HeartbeatInterval: 5 * time.Second,
			RebalanceInterval: time.Second,
			PersistInterval:   200 * time.Millisecond,
			RetryDelay:        time.Second,
			MaxReconsumeTimes: retryMaxReconsume,
		}, func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
			return s.consume(proc, msgs)
		})
		if err != nil {
			c.Close()
			return err
		}
		if err := retry(ctx, 20*time.Second, func(ctx context.Context) error { return p.Start(ctx) }); err != nil {
			c.Close()
			return fmt.Errorf("jepsen: start retry consumer: %w", err)
		}
		members = append(members, member{c, p})
	}
	for i := range retryProducers {
		c, err := w.newClient()
		if err != nil {
			return err
		}
		rng := rand.New(rand.NewPCG(uint64(w.seed), uint64(3000+i)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			s.producer(ctx, c, rng, i)
		}()
	}
	wg.Wait()
	deadline := time.Now().Add(retryCatchUp)
	for s.open() > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if n := s.open(); n > 0 {
		w.log.Warn("jepsen: retry workload: values neither consumed nor dead-lettered after the catch-up", "values", n)
	}
	return nil
}

// consume is the retry consumers' callback (one message per batch).
func (s *retryState) consume(proc int, msgs []*client.MessageExt) client.ConsumeResult {
	w := s.w
	res := client.ConsumeSuccess
	for _, m := range msgs {
		v := string(m.Body)
		s.mu.Lock()
		n, planned := s.failures[v]
		s.mu.Unlock()
		// The topic it was consumed from: a broker's retry copy comes from
		// the group's retry topic (the client restores the original name,
		// keeping it in RETRY_TOPIC).
		from := m.Topic
		if t, ok := m.Property(message.PropertyRetryTopic); ok && t != "" {
			from = "%RETRY%" + RetryGroup
		}
		o := history.Op{Process: proc, Kind: history.RetryDeliver, Group: RetryGroup, Topic: from, Queue: int(m.QueueID),
			Offset: m.QueueOffset, Value: v, Reconsume: int(m.ReconsumeTimes), Decision: history.DecisionSuccess,
			Invoke: w.rec.now(), Outcome: history.OK}
		if planned && int(m.ReconsumeTimes) < n {
			o.Decision, res = history.DecisionLater, client.ConsumeRetryLater
		}
		o.Complete = w.rec.now()
		w.rec.op(o)
		if o.Decision == history.DecisionSuccess || int(m.ReconsumeTimes) >= retryMaxReconsume {
			s.mu.Lock()
			s.ended[v] = true
			s.mu.Unlock()
		}
	}
	return res
}

// producer sends values with planned failures to random queues of
// RetryTopic.
func (s *retryState) producer(ctx context.Context, c *client.Client, rng *rand.Rand, worker int) {
	w := s.w
	p := c.NewProducer(client.ProducerOptions{Group: "jepsen-retry-producers", MaxRetries: -1})
	proc := w.rec.process()
	for seq := 0; w.token(ctx); seq++ {
		value := fmt.Sprintf("r%d-%d", worker, seq)
		queue := rng.IntN(w.queues)
		n := 0
		switch r := rng.IntN(4); r {
		case 2:
			n = 1
		case 3:
			n = 2
		}
		s.mu.Lock()
		s.failures[value] = n
		s.mu.Unlock()
		for attempt := 1; ; attempt++ {
			o := history.Op{Process: proc, Kind: history.RetrySend, Topic: RetryTopic, Queue: queue, Value: value, Attempt: attempt,
				Failures: n, Group: RetryGroup, MaxReconsume: retryMaxReconsume, Invoke: w.rec.now()}
			m := &client.Message{Topic: RetryTopic, QueueID: int32(queue), Body: []byte(value),
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
