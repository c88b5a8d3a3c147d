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

// The transaction workload: beside two producers and the queue consumers
// of the main topic, two transaction producers (client.TransactionProducer,
// one producer group, each on its own client) send unique values
// "t<worker>-<seq>" to TxnTopic in transactions. Each value's local
// transaction decides commit (40%), rollback (30%) or unknown (30%); for
// an unknown one the value's check-back answer is planned too (commit or
// rollback, half each). Both producers answer check-backs from the same
// plan, so every answer about a value agrees with its local decision, and
// an unknown value ends as its check-back said. Sends are history.TxnSend
// ops (Decision: the local transaction's state, "" if it never ran), each
// check-back answered a history.TxnCheck op. One consumer per queue polls
// TxnTopic (history.TopicPoll). The brokers run with a short transaction
// timeout and check interval (txnTimeout, txnCheckInterval); after the run
// the producers stay until every unknown transaction was checked back and
// txnSettle has passed since the last send, so that every transaction has
// ended before the drain. The transaction checker judges the result.

// TxnTopic is the transaction workload's topic.
const TxnTopic = "jepsen-txn"

const (
	txnGroup         = "jepsen-txn-producers"
	txnConsumerGroup = "jepsen-txn-consumers"
	txnProducers     = 2
	// The brokers' transaction settings in this workload.
	txnTimeout       = time.Second
	txnCheckInterval = 2 * time.Second
	// txnSettle is how long after the last send the producers stay to
	// answer check-backs: a transaction whose END_TRANSACTION was lost is
	// checked back within txnTimeout plus a check interval.
	txnSettle = txnTimeout + 2*txnCheckInterval + time.Second
	// txnCatchUp bounds the wait for the check-backs of unknown
	// transactions after the run.
	txnCatchUp = 20 * time.Second
)

// txnState is the plan the transaction producers share.
type txnState struct {
	w  *workload
	mu sync.Mutex
	// local: the local transaction's decision per value; final: how the
	// value's transaction must end (local's decision, or for unknown, the
	// check-back's).
	local, final map[string]string
	// queue per value, for the check ops.
	queue map[string]int
	// waiting: values whose local transaction said unknown and which no
	// check-back answered yet; checked: values a check-back answered.
	waiting, checked map[string]bool
	lastSend         time.Time
}

func newTxnState(w *workload) *txnState {
	return &txnState{w: w, local: map[string]string{}, final: map[string]string{}, queue: map[string]int{}, waiting: map[string]bool{}, checked: map[string]bool{}}
}

func stateOf(d string) client.LocalTransactionState {
	switch d {
	case history.DecisionCommit:
		return client.CommitMessage
	case history.DecisionRollback:
		return client.RollbackMessage
	}
	return client.Unknown
}

// txnListener runs the local transactions and answers check-backs of one
// transaction producer.
type txnListener struct {
	s *txnState
	// ran records the values whose local transaction ran.
	ran func(v string)
}

func (l *txnListener) ExecuteLocalTransaction(_ context.Context, m *client.Message) client.LocalTransactionState {
	v := string(m.Body)
	l.ran(v)
	l.s.mu.Lock()
	d := l.s.local[v]
	if d == history.DecisionUnknown && !l.s.checked[v] {
		l.s.waiting[v] = true
	}
	l.s.mu.Unlock()
	return stateOf(d)
}

func (l *txnListener) CheckLocalTransaction(_ context.Context, m *client.MessageExt) client.LocalTransactionState {
	v := string(m.Body)
	w := l.s.w
	o := history.Op{Process: w.rec.process(), Kind: history.TxnCheck, Topic: TxnTopic, Value: v, Invoke: w.rec.now(), Outcome: history.OK}
	l.s.mu.Lock()
	d, ok := l.s.final[v]
	if !ok {
		d = history.DecisionRollback // never planned: roll it back
	}
	o.Queue = l.s.queue[v]
	delete(l.s.waiting, v)
	l.s.checked[v] = true
	l.s.mu.Unlock()
	o.Decision = d
	o.Complete = w.rec.now()
	w.rec.op(o)
	return stateOf(d)
}

// unsettled counts the unknown transactions not checked back yet.
func (s *txnState) unsettled() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waiting)
}

// runTxn runs the transaction producers and the consumers of TxnTopic
// until ctx ends, then lets the producers answer the last check-backs
// (settle) and shuts them down. start starts the consumers (workload.run).
func (s *txnState) runTxn(ctx context.Context, start func(func(context.Context, *client.Client, *rand.Rand) error, int), k int) error {
	w := s.w
	var (
		pwg   sync.WaitGroup
		clis  []*client.Client
		prods []*client.TransactionProducer
	)
	defer func() {
		for i, tp := range prods {
			sctx, cancel := context.WithTimeout(context.Background(), 2*w.timeout)
			_ = tp.Shutdown(sctx)
			cancel()
			clis[i].Close()
		}
	}()
	for i := range txnProducers {
		c, err := w.newClient()
		if err != nil {
			return err
		}
		var ranMu sync.Mutex
		ran := map[string]bool{}
		l := &txnListener{s: s, ran: func(v string) { ranMu.Lock(); ran[v] = true; ranMu.Unlock() }}
		var tp *client.TransactionProducer
		err = retry(ctx, 20*time.Second, func(ctx context.Context) error {
			p, err := c.NewTransactionProducer(client.TransactionProducerOptions{
				Producer:          client.ProducerOptions{Group: txnGroup, MaxRetries: 2},
				HeartbeatInterval: 2 * time.Second,
			}, l)
			if err != nil {
				return err
			}
			if err := p.Start(ctx); err != nil {
				return err
			}
			tp = p
			return nil
		})
		if err != nil {
			c.Close()
			return fmt.Errorf("jepsen: start transaction producer: %w", err)
		}
		clis, prods = append(clis, c), append(prods, tp)
		rng := rand.New(rand.NewPCG(uint64(w.seed), uint64(2000+i)))
		didRun := func(v string) bool { ranMu.Lock(); defer ranMu.Unlock(); return ran[v] }
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			s.producer(ctx, rng, i, tp, didRun)
		}()
	}
	for q := range w.queues {
		start(w.topicConsumer(TxnTopic, txnConsumerGroup, q), k)
		k++
	}
	pwg.Wait()
	s.settle()
	return nil
}

// settle waits, after the producers stopped sending, until every unknown
// transaction was checked back and txnSettle passed since the last send
// (at most txnCatchUp).
func (s *txnState) settle() {
	deadline := time.Now().Add(txnCatchUp)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		quiet := time.Since(s.lastSend) >= txnSettle
		s.mu.Unlock()
		if quiet && s.unsettled() == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.w.log.Warn("jepsen: transactions still unknown after the catch-up", "unknown", s.unsettled())
}

// producer sends transactional values to random queues of TxnTopic.
func (s *txnState) producer(ctx context.Context, rng *rand.Rand, worker int, tp *client.TransactionProducer, ran func(string) bool) {
	w := s.w
	proc := w.rec.process()
	for seq := 0; w.token(ctx); seq++ {
		value := fmt.Sprintf("t%d-%d", worker, seq)
		queue := rng.IntN(w.queues)
		local, final := history.DecisionCommit, history.DecisionCommit
		switch r := rng.IntN(10); {
		case r < 4:
		case r < 7:
			local, final = history.DecisionRollback, history.DecisionRollback
		default:
			local, final = history.DecisionUnknown, history.DecisionCommit
			if rng.IntN(2) == 0 {
				final = history.DecisionRollback
			}
		}
		s.mu.Lock()
		s.local[value], s.final[value], s.queue[value] = local, final, queue
		s.mu.Unlock()
		o := history.Op{Process: proc, Kind: history.TxnSend, Topic: TxnTopic, Queue: queue, Value: value, Invoke: w.rec.now()}
		m := &client.Message{Topic: TxnTopic, QueueID: int32(queue), Body: []byte(value),
			Properties: map[string]string{message.PropertyUniqKey: value}}
		sctx, cancel := context.WithTimeout(context.Background(), 4*(w.timeout+time.Second))
		res, err := tp.SendMessageInTransaction(sctx, m)
		cancel()
		o.Complete, o.Outcome, o.Error = w.rec.now(), outcome(err), errString(err)
		if ran(value) {
			o.Decision = local
			o.Offset = res.QueueOffset
		}
		w.rec.op(o)
		s.mu.Lock()
		s.lastSend = time.Now()
		s.mu.Unlock()
		if o.Outcome == history.Info {
			proc = w.rec.process()
		}
	}
}
