package cluster

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftmq/raftmq/cluster/filter"
	"github.com/raftmq/raftmq/internal/failpoint"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/offsets"
	"github.com/raftmq/raftmq/protocol/remoting"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/store/pop"
)

// Pop consumption (RocketMQ 5's SimpleConsumer model; package store/pop
// holds the state and its rules). The leader decides what a pop hands out
// from the replicated state, proposes the pop entry that hides it, and
// answers only once that entry applied: a message is never handed out
// before its pop is committed. Acks and changes of invisible time are ops
// too. Ops from concurrent requests share entries (popBatcher). The
// leader's revive loop (popReviveLoop) proposes the revival of records
// whose invisible time passed, after a read barrier at the start of each
// term, like the scheduler.
//
// The Go API (Pop, PopAck, PopChangeInvisible, PopPeek) is what the
// remoting handlers (pop_handlers.go) call, and what a gRPC service can
// call: it works on the leader only (ErrNotLeader elsewhere) and uses no
// remoting types.

// Pop settings.
const (
	// MaxPopInvisible is the longest invisible time a pop or a change may
	// ask for: 12 hours, as RocketMQ's proxy.
	MaxPopInvisible = 12 * time.Hour
	// popReviveTick is how often the leader looks for records to revive.
	popReviveTick = 50 * time.Millisecond
	// popReviveMax bounds the revives proposed per tick.
	popReviveMax = 1024
	// popBatchOps bounds the ops of one pop entry.
	popBatchOps = 1024
	// popInFlight bounds the pop entries in flight at once: while one
	// commits, the next ops queue up and share the next entry. One keeps
	// the most ops per entry, and a pop entry behind another waits for
	// the commit before it in the log anyway: against 8 in flight, 16
	// SimpleConsumers popped 1.28x as fast and 4 with acks in flight
	// 1.12x (scripts/pop-ab.sh, docs/benchmarks.md "Pop entries one at a
	// time").
	popInFlight = 1
	// popMaxBytes bounds the records one pop reads per queue.
	popMaxBytes = 4 << 20
)

// Errors of the pop API. The remoting handlers map them to RocketMQ's
// codes; store.ErrUnknownTopic is a topic that does not exist.
var (
	// ErrPopInvalid is a request with a bad parameter (max messages,
	// invisible time, queue id, receipt).
	ErrPopInvalid = errors.New("cluster: invalid pop request")
	// ErrPopNoGroup is a pop of a group without a config.
	ErrPopNoGroup = errors.New("cluster: subscription group does not exist")
	// ErrPopNoPermission is a pop of a topic not readable, or of a group
	// whose consumption is disabled.
	ErrPopNoPermission = errors.New("cluster: no permission to pop")
	// ErrPopFilter is a filter expression that does not compile.
	ErrPopFilter = errors.New("cluster: bad filter expression")
	// ErrReceiptExpired is an ack or change with a receipt whose message
	// was popped again, or had its invisible time changed, since: another
	// receipt holds it. Nothing was changed.
	ErrReceiptExpired = pop.ErrStale
	// ErrReceiptUnknown is an ack or change of an offset the group never
	// popped (a forged receipt, or another group's). Nothing was changed.
	ErrReceiptUnknown = pop.ErrNotPopped
)

// PopRequest asks for up to Max messages of Group in Topic, hidden from
// the group for Invisible.
type PopRequest struct {
	Group, Topic string
	// QueueID is the queue to pop from; < 0: any readable queue.
	QueueID   int32
	Max       int
	Invisible time.Duration
	// InitMode is where a group with no position in a queue starts:
	// remoting.PopInitMin (the queue's first message) or PopInitMax (its
	// last one).
	InitMode int32
	// Order: orderly (FIFO) pop: a queue's next message is not handed out
	// while an earlier one is in flight. A group whose config says
	// consumeMessageOrderly always pops in order.
	Order bool
	// ExpressionType (TAG or SQL92, "" is TAG) and Expression ("" is *)
	// filter the messages; those the filter rejects are passed over.
	ExpressionType, Expression string
	// AttemptID, for an orderly pop, names the attempt: a pop repeating
	// the attempt id of the queue's batch in flight gets that batch again
	// (same receipts), so a client whose answer was lost does not wait
	// for the invisible time.
	AttemptID string
}

// Popped is one message a pop handed out.
type Popped struct {
	// Record is the stored record (RocketMQ's encoding, as a pull returns
	// it) with its receipt in property POP_CK and the delivery attempts
	// before this one in its reconsume times.
	Record      []byte
	QueueID     int32
	QueueOffset int64
	// Attempt counts deliveries of the message, from 1.
	Attempt int32
	// Receipt acks it, or changes its invisible time.
	Receipt Receipt
}

// PopResult is what a pop handed out.
type PopResult struct {
	Messages []Popped
	// PopTime is the leader's time of the pop (ms): the receipts' pop
	// time.
	PopTime int64
	// Rest approximates the messages left to pop in the queues looked at.
	Rest int64
	// StartOffsets are, by queue, the first offset each queue's pop
	// looked at (POP_MESSAGE's startOffsetInfo).
	StartOffsets map[int32]int64
	// Body, when set, holds the Messages' records back to back (they are
	// slices of it), so that the answer sends it as it is; nil: join them.
	Body []byte
}

// Receipt names one delivery of a popped message: what an ack or a change
// of invisible time presents. Its string form is RocketMQ's POP_CK.
type Receipt struct {
	Group, Topic string
	QueueID      int32
	Offset       int64
	PopTime      int64
	Invisible    int64 // ms
	StartOffset  int64
	Order        bool
	BrokerName   string
}

// String returns the receipt in RocketMQ's POP_CK format.
func (r Receipt) String() string { return r.ExtraInfo().String() }

// ExtraInfo returns the receipt's fields as RocketMQ's extraInfo.
func (r Receipt) ExtraInfo() remoting.ExtraInfo {
	rq := int32(0)
	if r.Order {
		rq = remoting.PopOrderReviveQueue
	}
	return remoting.ExtraInfo{StartOffset: r.StartOffset, PopTime: r.PopTime, InvisibleTime: r.Invisible, ReviveQid: rq,
		BrokerName: r.BrokerName, QueueID: r.QueueID, QueueOffset: r.Offset}
}

// ParseReceipt reads a POP_CK receipt of group's message in topic. offset
// is the message's queue offset when the receipt does not carry it (-1:
// it must).
func ParseReceipt(group, topic, s string, offset int64) (Receipt, error) {
	e, err := remoting.ParseExtraInfo(s)
	if err != nil {
		return Receipt{}, fmt.Errorf("%w: %w", ErrPopInvalid, err)
	}
	if e.TopicFlag != 0 {
		return Receipt{}, fmt.Errorf("%w: receipt of a pop retry topic (flag %d): raftmq has none", ErrPopInvalid, e.TopicFlag)
	}
	if e.QueueOffset < 0 {
		e.QueueOffset = offset
	}
	if e.QueueOffset < 0 {
		return Receipt{}, fmt.Errorf("%w: receipt %q names no offset", ErrPopInvalid, s)
	}
	return Receipt{Group: group, Topic: topic, QueueID: e.QueueID, Offset: e.QueueOffset, PopTime: e.PopTime, Invisible: e.InvisibleTime,
		StartOffset: e.StartOffset, Order: e.ReviveQid == remoting.PopOrderReviveQueue, BrokerName: e.BrokerName}, nil
}

// popState is the broker's pop machinery: the batcher, the per-queue
// locks that serialise the building of pops of one queue on the leader,
// the queues' proposed cursors, and the term the last read barrier was
// for.
type popState struct {
	calls chan *popCall
	slots chan struct{}

	mu    sync.Mutex
	locks map[pop.Key]chan struct{}
	// ahead holds, by queue, the cursor the pops in flight lead to
	// (under mu): a queue's next pop is built from it rather than from
	// the applied state, so that several pops of a queue are in flight
	// at once (pipelined pops).
	ahead map[pop.Key]*popAhead

	term atomic.Uint64
	next atomic.Uint32 // rotates the first queue of pops of any queue
	// pipelined counts the pops built from a queue's pops in flight.
	pipelined atomic.Uint64
	// inlineAcks counts the batch acks taken on a connection's reader
	// (inlineBatchAck) rather than by a handler.
	inlineAcks atomic.Uint64

	pollMu  sync.Mutex
	polling map[string]int // suspended pops by group@topic@queue
	pollMax int            // popPollingMax

	traces popTraces // sampled pops' and batch acks' stage times (poptrace.go)
}

func newPopState() *popState {
	return &popState{calls: make(chan *popCall, 4096), slots: make(chan struct{}, popInFlight),
		locks: map[pop.Key]chan struct{}{}, ahead: map[pop.Key]*popAhead{}, polling: map[string]int{}, pollMax: popPollingMax}
}

// popAhead is a queue's proposed pop state on the leader: where its
// cursor will be once the pops in flight apply, and the revived records
// they take. It is only a guess that saves a commit round per pop: apply
// checks every pop against the replicated state (pop.ErrMoved), so a
// wrong guess costs a refused pop, never a message handed out twice. A
// pop in flight that fails or is refused breaks it; a broken one, or one
// of an earlier term, is replaced by the applied state at the next pop,
// and it is forgotten once nothing is in flight.
type popAhead struct {
	term    uint64
	next    int64
	pending int
	claimed map[int64]int // revived offsets taken by pops in flight
	broken  bool
}

// aheadOf returns k's proposed state to build a pop from in term (nil:
// build from the applied state). Call with k's lock held.
func (p *popState) aheadOf(k pop.Key, term uint64) *popAhead {
	p.mu.Lock()
	defer p.mu.Unlock()
	a := p.ahead[k]
	if a == nil || a.broken || a.term != term || a.pending == 0 {
		return nil
	}
	return a
}

// proposed records op, built from a (nil: from the applied state) in
// term, as in flight, and returns what its completion must report to
// (landed). Call with k's lock held, before the op is queued.
func (p *popState) proposed(a *popAhead, term uint64, op *pop.Op) *popAhead {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := op.Key()
	if a == nil || a.broken || p.ahead[k] != a {
		a = &popAhead{term: term, claimed: map[int64]int{}}
		p.ahead[k] = a
	}
	a.next = op.To
	a.pending++
	for _, off := range op.Offsets {
		if off < op.From {
			a.claimed[off]++
		}
	}
	return a
}

// landed records that op, proposed on a, completed: err is its own
// refusal or the entry's failure.
func (p *popState) landed(a *popAhead, op *pop.Op, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	a.pending--
	if err != nil {
		a.broken = true
	}
	for _, off := range op.Offsets {
		if off >= op.From {
			break
		}
		if a.claimed[off]--; a.claimed[off] <= 0 {
			delete(a.claimed, off)
		}
	}
	if a.pending == 0 && p.ahead[op.Key()] == a {
		delete(p.ahead, op.Key())
	}
}

// breakAhead marks a as wrong: the next pop of its queue is built from
// the applied state.
func (p *popState) breakAhead(a *popAhead) {
	p.mu.Lock()
	defer p.mu.Unlock()
	a.broken = true
}

// isClaimed reports whether a pop in flight on a takes revived offset
// off.
func (p *popState) isClaimed(a *popAhead, off int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return a.claimed[off] > 0
}

// lock takes k's pop lock: waiting for it (until ctx ends) when wait,
// else only if it is free.
func (p *popState) lock(ctx context.Context, k pop.Key, wait bool) bool {
	p.mu.Lock()
	l, ok := p.locks[k]
	if !ok {
		l = make(chan struct{}, 1)
		p.locks[k] = l
	}
	p.mu.Unlock()
	if !wait {
		select {
		case l <- struct{}{}:
			return true
		default:
			return false
		}
	}
	select {
	case l <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (p *popState) unlock(k pop.Key) {
	p.mu.Lock()
	l := p.locks[k]
	p.mu.Unlock()
	<-l
}

// popCall is one op waiting for its entry.
type popCall struct {
	op   pop.Op
	dlq  *message.Message // a DLQ revive's copy
	done chan popDone
	// trace, if set, is the sampled request the op belongs to.
	trace *popTrace
	// landed, if set, learns the outcome first, whether or not the
	// caller still waits for it.
	landed func(popDone)
}

// finish hands the call its outcome.
func (c *popCall) finish(d popDone) {
	if c.landed != nil {
		c.landed(d)
	}
	c.done <- d
}

type popDone struct {
	res pop.Result
	err error
}

// popBatcher packs the ops queued by requests into pop entries, up to
// popInFlight entries at a time: ops that arrive while entries commit
// share the next one.
func (b *Broker) popBatcher() {
	p := b.pop
	var calls []*popCall
	drain := func() {
		for len(calls) < popBatchOps {
			select {
			case c := <-p.calls:
				calls = append(calls, c)
			default:
				return
			}
		}
	}
	for {
		select {
		case c := <-p.calls:
			calls = append(calls[:0], c)
		case <-b.stopc:
			return
		}
		drain()
		select {
		case p.slots <- struct{}{}:
		case <-b.stopc:
			for _, c := range calls {
				c.finish(popDone{err: ErrStopping})
			}
			return
		}
		drain()
		b.proposePops(slices.Clone(calls))
	}
}

// proposePops proposes one entry of calls' ops and answers each call when
// it applied. It releases its in-flight slot when done.
func (b *Broker) proposePops(calls []*popCall) {
	now := time.Now()
	batch := &pop.Batch{Now: now.UnixMilli(), Ops: make([]pop.Op, len(calls))}
	var (
		dlq    []*message.Message
		tr     *raftlog.Trace
		traced bool
	)
	for i, c := range calls {
		batch.Ops[i] = c.op
		if c.op.DLQ {
			dlq = append(dlq, c.dlq)
		}
		traced = traced || c.trace != nil
	}
	if traced {
		tr = raftlog.NewTrace(now)
		pops := 0
		for _, c := range calls {
			if c.op.Type == pop.OpPop {
				pops++
			}
		}
		for _, c := range calls {
			if c.trace != nil {
				c.trace.batched(now, tr, len(calls), pops)
			}
		}
	}
	done := func(res []pop.Result, _ []store.MessageResult, err error) {
		<-b.pop.slots
		for i, c := range calls {
			switch {
			case err != nil:
				c.finish(popDone{err: err})
			case i < len(res):
				c.finish(popDone{res: res[i]})
			default:
				c.finish(popDone{err: fmt.Errorf("%w: pop entry with fewer results than ops", store.ErrBadEntry)})
			}
		}
		b.met.PopEntries.Inc()
	}
	if err := b.rep.ProposePopAsync(batch, dlq, tr, done); err != nil {
		done(nil, nil, err)
	}
}

// popOps queues ops (with their DLQ copies, nil for others) and waits for
// their results.
func (b *Broker) popOps(ctx context.Context, ops []pop.Op, dlq []*message.Message) ([]pop.Result, error) {
	tr := popTraceOf(ctx)
	calls := make([]*popCall, len(ops))
	for i := range ops {
		calls[i] = &popCall{op: ops[i], done: make(chan popDone, 1), trace: tr}
		if dlq != nil {
			calls[i].dlq = dlq[i]
		}
	}
	if tr != nil {
		tr.stamp(popBuilt, time.Now())
	}
	if err := b.queuePopCalls(ctx, calls); err != nil {
		return nil, err
	}
	out, err := b.waitPopCalls(ctx, calls)
	if tr != nil {
		tr.stamp(popWoken, time.Now())
	}
	return out, err
}

// queuePopCalls hands calls to the batcher, in order. A call it could not
// queue is finished with the error (so its landed hook runs).
func (b *Broker) queuePopCalls(ctx context.Context, calls []*popCall) error {
	for i, c := range calls {
		var err error
		select {
		case b.pop.calls <- c:
			continue
		case <-ctx.Done():
			err = fmt.Errorf("indeterminate: %w", ctx.Err())
		case <-b.stopc:
			err = ErrStopping
		}
		for _, c := range calls[i:] {
			c.finish(popDone{err: err})
		}
		return err
	}
	return nil
}

// waitPopCalls waits for the results of queued calls.
func (b *Broker) waitPopCalls(ctx context.Context, calls []*popCall) ([]pop.Result, error) {
	out := make([]pop.Result, len(calls))
	var firstErr error
	for i, c := range calls {
		select {
		case d := <-c.done:
			if d.err != nil && firstErr == nil {
				firstErr = d.err
			}
			out[i] = d.res
		case <-ctx.Done():
			return nil, fmt.Errorf("indeterminate: %w", ctx.Err())
		}
	}
	return out, firstErr
}

// popBarrier runs a read barrier once per term, so that the leader
// decides pops from state that holds every earlier leader's commits.
func (b *Broker) popBarrier(ctx context.Context) error {
	node := b.rep.Node()
	if !node.IsLeader() {
		return ErrNotLeader
	}
	term := node.Status().Term
	if b.pop.term.Load() == term {
		return nil
	}
	if err := b.readBarrier(ctx); err != nil {
		return fmt.Errorf("read barrier: %w: %w", ErrNotLeader, err)
	}
	b.pop.term.Store(term)
	return nil
}

// popCheck validates a pop's group, topic and queue and returns the
// topic's and the group's config.
func (b *Broker) popCheck(group, topic string, queueID int32) (offsets.TopicConfig, offsets.SubscriptionGroupConfig, error) {
	st := b.rep.Store()
	tc, ok := st.Topic(topic)
	if !ok {
		return tc, offsets.SubscriptionGroupConfig{}, fmt.Errorf("%w: topic[%s] not exist, apply first please!", store.ErrUnknownTopic, topic)
	}
	gc, ok := st.SubscriptionGroup(group)
	if !ok {
		return tc, gc, fmt.Errorf("%w: subscription group [%s] does not exist", ErrPopNoGroup, group)
	}
	if tc.Perm&offsets.PermRead == 0 {
		return tc, gc, fmt.Errorf("%w: the topic[%s] pop message is forbidden", ErrPopNoPermission, topic)
	}
	if b.brokerPerm()&remoting.PermRead == 0 {
		return tc, gc, fmt.Errorf("%w: the broker[%s] pop message is forbidden", ErrPopNoPermission, b.cfg.BrokerName)
	}
	if !gc.ConsumeEnable {
		return tc, gc, fmt.Errorf("%w: subscription group no permission, %s", ErrPopNoPermission, group)
	}
	if queueID >= tc.ReadQueueNums {
		return tc, gc, fmt.Errorf("%w: queueId[%d] is illegal, topic:[%s] topicConfig.readQueueNums:[%d] consumer:[%s]",
			ErrPopInvalid, queueID, topic, tc.ReadQueueNums, group)
	}
	return tc, gc, nil
}

// Pop hides and returns up to req.Max messages (leader only). An empty
// result is not an error: the caller polls again.
func (b *Broker) Pop(ctx context.Context, req PopRequest) (*PopResult, error) {
	switch {
	case req.Max <= 0 || req.Max > remoting.PopMaxMessages:
		return nil, fmt.Errorf("%w: the max message num of pop is %d, not in [1, %d]", ErrPopInvalid, req.Max, remoting.PopMaxMessages)
	case req.Invisible <= 0 || req.Invisible > MaxPopInvisible:
		return nil, fmt.Errorf("%w: invisibleTime %d ms is not in (0, %d]", ErrPopInvalid, req.Invisible.Milliseconds(), MaxPopInvisible.Milliseconds())
	case req.InitMode != remoting.PopInitMin && req.InitMode != remoting.PopInitMax:
		return nil, fmt.Errorf("%w: initMode %d", ErrPopInvalid, req.InitMode)
	}
	tc, gc, err := b.popCheck(req.Group, req.Topic, req.QueueID)
	if err != nil {
		return nil, err
	}
	flt, err := b.filters.Get(req.ExpressionType, req.Expression)
	if err != nil {
		return nil, fmt.Errorf("%w: parse the consumer's subscription [%s] failed: %w", ErrPopFilter, req.Expression, err)
	}
	if err := b.popBarrier(ctx); err != nil {
		return nil, err
	}
	order := req.Order || gc.ConsumeMessageOrderly
	queues := []int32{req.QueueID}
	if req.QueueID < 0 {
		n := tc.ReadQueueNums
		queues = make([]int32, n)
		start := int32(b.pop.next.Add(1) % uint32(max(n, 1)))
		for i := range n {
			queues[i] = (start + i) % n
		}
	}
	res := &PopResult{StartOffsets: map[int32]int64{}, Messages: make([]Popped, 0, req.Max)}
	for attempt := 0; attempt < 3 && len(res.Messages) == 0; attempt++ {
		moved, err := b.popQueues(ctx, &req, flt, order, queues, req.QueueID >= 0, res)
		if err != nil {
			return nil, err
		}
		if !moved {
			break
		}
		// Some op was built from a state that moved (another pop got
		// there first): build again if nothing was handed out.
	}
	if len(res.Messages) > 0 {
		res.PopTime = res.Messages[0].Receipt.PopTime
		b.met.Popped.Add(float64(len(res.Messages)))
	}
	return res, nil
}

// popQueues pops up to req.Max messages from queues into res: it locks
// each queue and builds its op from this node's state (and the pops of
// the queue in flight: popAhead), queues the ops together (one entry,
// unless the batcher splits them), and hands out what apply granted. A
// queue's lock is held while its op is built and queued, so that its ops
// reach the log in the order they were built; an orderly pop holds it
// until its entry applied (one orderly pop of a queue in flight). moved
// reports an op refused because its queue's cursor had moved.
func (b *Broker) popQueues(ctx context.Context, req *PopRequest, flt filter.Filter, order bool, queues []int32, wait bool, res *PopResult) (moved bool, err error) {
	var bs []builtPop
	term := b.pop.term.Load()
	left := req.Max
	for _, q := range queues {
		if left <= 0 {
			break
		}
		k := pop.Key{Group: req.Group, Topic: req.Topic, Queue: q}
		if !b.pop.lock(ctx, k, wait) {
			continue // another pop of the queue is under way: skip it, as RocketMQ does
		}
		if order && req.AttemptID != "" {
			if n, err := b.popAgain(ctx, req, k, res); err != nil || n > 0 {
				b.pop.unlock(k)
				if err != nil {
					return false, err
				}
				left -= n
				continue
			}
		}
		var ahead *popAhead
		if !order {
			if ahead = b.pop.aheadOf(k, term); ahead != nil {
				b.pop.pipelined.Add(1)
			}
		}
		op, recs, rest, err := b.buildPop(req, flt, order, k, left, ahead)
		res.Rest += rest
		if err != nil || op == nil {
			b.pop.unlock(k)
			if err != nil && len(bs) == 0 {
				return false, err
			}
			continue
		}
		bs = append(bs, builtPop{op: *op, recs: recs, ahead: ahead})
		left -= len(op.Offsets)
	}
	locked := len(bs)
	unlock := func() {
		for _, x := range bs[:locked] {
			b.pop.unlock(x.op.Key())
		}
		locked = 0
	}
	defer unlock()
	if len(bs) == 0 {
		return false, nil
	}
	if failpoint.On(b.fp, failpoint.PopBeforeCommit) {
		return false, b.popBeforeCommit(req, order, bs, res)
	}
	tr := popTraceOf(ctx)
	if tr != nil {
		tr.stamp(popBuilt, time.Now())
	}
	calls := make([]*popCall, len(bs))
	for i := range bs {
		c := &popCall{op: bs[i].op, done: make(chan popDone, 1), trace: tr}
		if !order {
			a := b.pop.proposed(bs[i].ahead, term, &c.op)
			c.landed = func(d popDone) { b.pop.landed(a, &c.op, cmp.Or(d.err, d.res.Err)) }
		}
		calls[i] = c
	}
	if err := b.queuePopCalls(ctx, calls); err != nil {
		return false, err
	}
	if !order {
		unlock() // the ops are queued in order: the queues' next pops may be built
	}
	out, err := b.waitPopCalls(ctx, calls)
	if tr != nil {
		tr.stamp(popWoken, time.Now())
	}
	if err != nil {
		return false, err
	}
	var refused error
	room, perRec := 0, receiptRoom(Receipt{BrokerName: b.cfg.BrokerName})
	for i, r := range out {
		if len(r.Popped) > 0 { // mostly all it read; room for all of it
			for _, x := range bs[i].recs {
				room += len(x.raw) + perRec
			}
		}
	}
	buf := make([]byte, 0, room)    // the popped messages with their receipts, one after another
	whole := len(res.Messages) == 0 // buf will hold all of res's messages
	for i, r := range out {
		op, q := &bs[i].op, bs[i].op.Queue
		switch {
		case errors.Is(r.Err, pop.ErrMoved):
			moved = true
		case errors.Is(r.Err, pop.ErrBusy):
		case r.Err != nil:
			refused = cmp.Or(refused, r.Err)
			b.log.Debug("cluster: pop op refused", "group", req.Group, "topic", req.Topic, "queue", q, "err", r.Err)
		}
		if len(r.Popped) == 0 {
			continue
		}
		res.StartOffsets[q] = op.From
		if len(op.Offsets) > 0 {
			res.StartOffsets[q] = min(op.From, op.Offsets[0])
		}
		recs := bs[i].recs
		for _, rec := range r.Popped {
			// Both are in offset order: pass the records not granted.
			for len(recs) > 0 && recs[0].off < rec.Offset {
				recs = recs[1:]
			}
			var raw []byte
			if len(recs) > 0 && recs[0].off == rec.Offset {
				raw = recs[0].raw
			}
			if raw == nil {
				continue // not read (cannot happen: apply grants only listed offsets)
			}
			receipt := Receipt{Group: req.Group, Topic: req.Topic, QueueID: q, Offset: rec.Offset, PopTime: rec.PopTime,
				Invisible: req.Invisible.Milliseconds(), StartOffset: res.StartOffsets[q], Order: order, BrokerName: b.cfg.BrokerName}
			start := len(buf)
			buf, err = appendWithReceipt(buf, raw, receipt, rec.Attempt)
			if err != nil {
				b.log.Error("cluster: a popped message cannot be re-encoded; it is revived later", "topic", req.Topic, "queue", q, "offset", rec.Offset, "err", err)
				continue
			}
			m := buf[start:len(buf):len(buf)]
			res.Messages = append(res.Messages, Popped{Record: m, QueueID: q, QueueOffset: rec.Offset, Attempt: rec.Attempt, Receipt: receipt})
		}
	}
	if whole {
		res.Body = buf
	} else {
		res.Body = nil
	}
	if len(res.Messages) == 0 && refused != nil {
		return false, refused
	}
	return moved, nil
}

// popAgain serves an orderly pop that repeats the attempt id of its
// queue's batch in flight: it hands that batch out again, with the same
// receipts and no entry, after a read barrier (so that an ack or revive
// committed meanwhile is seen). It returns how many messages it added to
// res (0: not a repeat).
func (b *Broker) popAgain(ctx context.Context, req *PopRequest, k pop.Key, res *PopResult) (int, error) {
	hidden := b.rep.Store().PopHidden(k)
	if len(hidden) == 0 {
		return 0, nil
	}
	for _, r := range hidden {
		if r.AttemptID != req.AttemptID {
			return 0, nil
		}
	}
	if err := b.readBarrier(ctx); err != nil {
		return 0, fmt.Errorf("read barrier: %w: %w", ErrNotLeader, err)
	}
	hidden = b.rep.Store().PopHidden(k)
	st := b.rep.Store()
	added := 0
	for _, r := range hidden {
		if r.AttemptID != req.AttemptID {
			continue
		}
		gr, err := st.GetMessages(k.Topic, k.Queue, r.Offset, 1, popMaxBytes, nil)
		if err != nil || gr.Status != store.Found || gr.QueueOffsets[0] != r.Offset {
			continue // removed by retention
		}
		start := hidden[0].Offset
		receipt := Receipt{Group: k.Group, Topic: k.Topic, QueueID: k.Queue, Offset: r.Offset, PopTime: r.PopTime,
			Invisible: r.VisibleAt - r.PopTime, StartOffset: start, Order: true, BrokerName: b.cfg.BrokerName}
		m, err := withReceipt(gr.Records[0], receipt, r.Attempt)
		if err != nil {
			continue
		}
		res.StartOffsets[k.Queue] = start
		res.Body = nil
		res.Messages = append(res.Messages, Popped{Record: m, QueueID: k.Queue, QueueOffset: r.Offset, Attempt: r.Attempt, Receipt: receipt})
		added++
	}
	return added, nil
}

// builtPop is one queue's pop op as buildPop decided it, with the
// messages it lists, read by offset, and the proposed state it was built
// from (nil: the applied state).
type builtPop struct {
	op    pop.Op
	recs  popRecs
	ahead *popAhead
}

// popRecs are the records a pop op lists, by offset, ascending.
type popRecs []popRec

type popRec struct {
	off int64
	raw []byte
}

// sortInto sorts rs (listed as op.Offsets, revived records first, then
// those from the cursor on; already in order but for an odd state) and
// op.Offsets alike.
func (rs popRecs) sortInto(op *pop.Op) {
	if slices.IsSorted(op.Offsets) {
		return
	}
	slices.SortFunc(rs, func(a, b popRec) int { return cmp.Compare(a.off, b.off) })
	for i := range rs {
		op.Offsets[i] = rs[i].off
	}
}

// get returns the record at off, or nil.
func (rs popRecs) get(off int64) []byte {
	i, ok := slices.BinarySearchFunc(rs, off, func(r popRec, off int64) int { return cmp.Compare(r.off, off) })
	if !ok {
		return nil
	}
	return rs[i].raw
}

// buildPop decides a pop of up to n messages of k from this node's state:
// its revived records first, then messages from the cursor on, and reads
// them (by offset). With ahead (the pops of k in flight), the cursor is
// where they lead and the revived records they take are passed over.
// rest counts the messages left behind. A nil op: nothing to pop.
func (b *Broker) buildPop(req *PopRequest, flt filter.Filter, order bool, k pop.Key, n int, ahead *popAhead) (*pop.Op, popRecs, int64, error) {
	st := b.rep.Store()
	now := time.Now().UnixMilli()
	op := &pop.Op{Type: pop.OpPop, Group: k.Group, Topic: k.Topic, Queue: k.Queue, Invisible: req.Invisible.Milliseconds(), Order: order}
	if order {
		op.AttemptID = req.AttemptID
	}
	recs := make(popRecs, 0, n)
	view := st.PopView(k, n, now)
	maxOff := st.MaxOffset(k.Topic, k.Queue)
	if ahead != nil && view.Exists && view.Next > ahead.next {
		// The applied cursor passed the guess: build from it.
		b.pop.breakAhead(ahead)
		ahead = nil
	}
	switch {
	case ahead != nil:
		op.From = ahead.next
	case view.Exists:
		op.From = view.Next
	}
	if view.Exists {
		if order && view.Busy {
			return nil, nil, 0, nil
		}
		for _, r := range view.Revived {
			if ahead != nil && b.pop.isClaimed(ahead, r.Offset) {
				continue
			}
			gr, err := st.GetMessages(k.Topic, k.Queue, r.Offset, 1, popMaxBytes, nil)
			if err != nil {
				return nil, nil, 0, fmt.Errorf("read queue %s/%d at %d: %w", k.Topic, k.Queue, r.Offset, err)
			}
			if gr.Status != store.Found || gr.QueueOffsets[0] != r.Offset {
				// Removed by retention: it can be delivered no more.
				b.log.Debug("cluster: a revived pop message is gone from its queue", "topic", k.Topic, "queue", k.Queue, "offset", r.Offset)
				continue
			}
			op.Offsets = append(op.Offsets, r.Offset)
			recs = append(recs, popRec{r.Offset, gr.Records[0]})
		}
	} else if ahead == nil {
		op.Init = true
		if off, has := st.ConsumerOffset(k.Group, k.Topic, k.Queue); has {
			op.From = off
		} else if req.InitMode == remoting.PopInitMin {
			op.From = st.MinOffset(k.Topic, k.Queue)
		} else {
			op.From = max(maxOff-1, st.MinOffset(k.Topic, k.Queue))
		}
	}
	op.To = op.From
	if order && len(op.Offsets) > 0 {
		// An orderly pop hands out the earliest messages only: the revived
		// ones go again before anything newer.
		recs.sortInto(op)
		return op, recs, max(maxOff-op.From, 0), nil
	}
	if left := n - len(op.Offsets); left > 0 && op.From < maxOff {
		var tags func(int64) bool
		if flt != nil {
			tags = flt.MatchTagsCode
		}
		from := op.From
		gr, err := st.GetMessages(k.Topic, k.Queue, from, left, popMaxBytes, tags)
		if err == nil && gr.Status == store.OffsetTooSmall {
			// Retention removed what the cursor had not reached: pass it.
			gr, err = st.GetMessages(k.Topic, k.Queue, gr.NextBeginOffset, left, popMaxBytes, tags)
		}
		if err != nil {
			return nil, nil, 0, fmt.Errorf("read queue %s/%d at %d: %w", k.Topic, k.Queue, from, err)
		}
		keepMatching(&gr, flt)
		switch gr.Status {
		case store.Found, store.NoMatchedMessage:
			op.To = gr.NextBeginOffset
			for i, off := range gr.QueueOffsets {
				op.Offsets = append(op.Offsets, off)
				recs = append(recs, popRec{off, gr.Records[i]})
			}
		case store.OffsetOverflowBadly:
			// The cursor is past the queue's end (a queue reset by a
			// snapshot): nothing to pop until it grows again.
		}
	}
	if len(op.Offsets) == 0 && op.To == op.From && !op.Init {
		return nil, nil, max(maxOff-op.From, 0), nil
	}
	recs.sortInto(op)
	return op, recs, max(maxOff-op.To, 0), nil
}

// withReceipt returns a copy of a stored record with the receipt in
// POP_CK (and the pop time in FIRST_POP_TIME at the first delivery, if
// the record has none) and attempt-1 in its reconsume times. It edits the
// record's bytes: the properties are its last field, so the copy is the
// record with the pairs appended, its lengths and reconsume times
// patched (the body, and so its CRC, is unchanged).
func withReceipt(rec []byte, r Receipt, attempt int32) ([]byte, error) {
	return appendWithReceipt(make([]byte, 0, len(rec)+receiptRoom(r)), rec, r, attempt)
}

// receiptRoom is an upper bound on the bytes withReceipt adds to a record
// with no POP_CK of its own.
func receiptRoom(r Receipt) int { return len(r.BrokerName) + 160 }

// appendWithReceipt appends to dst what withReceipt returns, so that the
// messages of one pop share one buffer rather than one allocation each.
// On an error dst is returned unchanged.
func appendWithReceipt(dst, rec []byte, r Receipt, attempt int32) ([]byte, error) {
	v, err := message.Parse(rec, false)
	if err != nil {
		return dst, err
	}
	rec = rec[:v.Size]
	props := v.Properties
	if _, ok := message.PropertyBytes(props, message.PropertyPopCK); ok {
		props = []byte(message.DeleteRawProperty(string(props), message.PropertyPopCK))
	}
	offPropLen := len(rec) - len(v.Properties) - 2
	base := len(dst)
	out := append(dst, rec[:offPropLen+2]...)
	out = append(out, props...)
	if len(props) > 0 && props[len(props)-1] != message.PropertySeparator {
		out = append(out, message.PropertySeparator)
	}
	out = append(out, message.PropertyPopCK...)
	out = append(out, message.NameValueSeparator)
	out = r.ExtraInfo().Append(out)
	out = append(out, message.PropertySeparator)
	if _, ok := message.PropertyBytes(props, message.PropertyFirstPopTime); !ok && attempt <= 1 {
		out = appendPair(out, message.PropertyFirstPopTime, strconv.FormatInt(r.PopTime, 10))
	}
	propLen := len(out) - base - offPropLen - 2
	if propLen > message.MaxPropertiesSize {
		return dst, fmt.Errorf("properties of %d bytes with the receipt, limit %d", propLen, message.MaxPropertiesSize)
	}
	out, dst = out[base:], out // the record alone, then dst with it
	binary.BigEndian.PutUint16(out[offPropLen:], uint16(propLen))
	binary.BigEndian.PutUint32(out[message.OffTotalSize:], uint32(len(out)))
	born, stored := message.HostSizeV4, message.HostSizeV4
	if v.SysFlag&message.SysFlagBornHostV6 != 0 {
		born = message.HostSizeV6
	}
	if v.SysFlag&message.SysFlagStoreHostV6 != 0 {
		stored = message.HostSizeV6
	}
	offReconsume := message.OffBornHost + born + 8 + stored
	binary.BigEndian.PutUint32(out[offReconsume:], uint32(max(attempt-1, 0)))
	return dst, nil
}

// appendPair appends one property pair.
func appendPair(dst []byte, name, value string) []byte {
	dst = append(dst, name...)
	dst = append(dst, message.NameValueSeparator)
	dst = append(dst, value...)
	return append(dst, message.PropertySeparator)
}

// PopAck acks receipts (leader only) and returns each one's outcome: nil
// (acked, or acked before: an ack is idempotent), ErrReceiptExpired or
// ErrReceiptUnknown (nothing changed), or another error. The error return
// is for the whole call (not the leader, not committed in time).
func (b *Broker) PopAck(ctx context.Context, rs []Receipt) ([]error, error) {
	if err := b.popBarrier(ctx); err != nil {
		return nil, err
	}
	if failpoint.On(b.fp, failpoint.AckInMemory) {
		return b.ackInMemory(rs), nil
	}
	ops, at := ackOps(rs, b.groupFormatLevel() >= store.FormatLevelAcks)
	out, err := b.popOps(ctx, ops, nil)
	if err != nil {
		return nil, err
	}
	errs, acked := ackOutcomes(len(rs), ops, at, out)
	b.met.PopAcked.Add(float64(acked))
	return errs, nil
}

// ackOutcomes maps the results of ack ops (ackOps: ops, at) to each of
// the n receipts' outcomes, and counts the records they removed.
func ackOutcomes(n int, ops []pop.Op, at [][]int, out []pop.Result) (errs []error, acked int) {
	errs = make([]error, n)
	for i, r := range out {
		if ops[i].Type == pop.OpAck {
			errs[at[i][0]] = r.Err
			if r.Err == nil && !r.Done {
				acked++
			}
			continue
		}
		for j, ri := range at[i] {
			switch {
			case r.Err != nil:
				errs[ri] = r.Err
			case r.Errs != nil:
				errs[ri] = r.Errs[j]
			}
		}
		acked += r.Acked
	}
	return errs, acked
}

// ackOps builds the ops that ack rs: with acks, one OpAcks for the
// receipts of one queue and pop time (the messages of one pop, as a batch
// ack names them) and an OpAck for a receipt alone; without, an OpAck per
// receipt, as a group with a member whose build predates OpAcks
// (store.FormatLevelAcks) needs. at lists, by op, the indexes in rs of its
// receipts, in the op's offset order.
func ackOps(rs []Receipt, acks bool) (ops []pop.Op, at [][]int) {
	type key struct {
		k       pop.Key
		popTime int64
	}
	idx := make(map[key]int, 4)
	for i, r := range rs {
		kk := key{pop.Key{Group: r.Group, Topic: r.Topic, Queue: r.QueueID}, r.PopTime}
		j, ok := idx[kk]
		if !ok || !acks {
			j = len(ops)
			idx[kk] = j
			ops = append(ops, pop.Op{Type: pop.OpAck, Group: r.Group, Topic: r.Topic, Queue: r.QueueID, Offset: r.Offset, PopTime: r.PopTime})
			at = append(at, []int{i})
			continue
		}
		o := &ops[j]
		if o.Type == pop.OpAck {
			o.Type, o.Offsets, o.Offset = pop.OpAcks, []int64{o.Offset}, 0
		}
		o.Offsets = append(o.Offsets, r.Offset)
		at[j] = append(at[j], i)
	}
	return ops, at
}

// PopDeadLetter moves the popped message a receipt names to its group's
// dead-letter topic and removes its record, in one entry (leader only):
// the copy is stored only if the record was removed. It returns
// ErrReceiptExpired when another receipt holds the message or it was
// acked, ErrReceiptUnknown when it was never popped.
func (b *Broker) PopDeadLetter(ctx context.Context, r Receipt) error {
	if err := b.popBarrier(ctx); err != nil {
		return err
	}
	k := pop.Key{Group: r.Group, Topic: r.Topic, Queue: r.QueueID}
	q, found := b.rep.Store().PopQueue(k)
	if !found || r.Offset >= q.Next {
		return ErrReceiptUnknown
	}
	rec := q.InFlight[r.Offset]
	if rec == nil || rec.PopTime != r.PopTime {
		return ErrReceiptExpired
	}
	m, err := b.popDeadLetter(ctx, k, *rec)
	if err != nil {
		return fmt.Errorf("dead-letter copy: %w", err)
	}
	out, err := b.popOps(ctx, []pop.Op{{Type: pop.OpDeadLetter, Group: r.Group, Topic: r.Topic, Queue: r.QueueID, Offset: r.Offset,
		PopTime: r.PopTime, DLQ: true}}, []*message.Message{m})
	if err != nil {
		return err
	}
	if out[0].Err != nil {
		return out[0].Err
	}
	if !out[0].DLQ {
		return fmt.Errorf("%w: dead letter applied without moving the message", store.ErrBadEntry)
	}
	b.log.Info("cluster: popped message moved to the dead-letter queue by its consumer", "group", r.Group, "topic", r.Topic,
		"queue", r.QueueID, "offset", r.Offset, "attempt", rec.Attempt)
	return nil
}

// PopChangeInvisible hides a popped message for d from now on (leader
// only) and returns its new receipt; the old one is dead. d may be 0 (the
// message is revived at the next tick).
func (b *Broker) PopChangeInvisible(ctx context.Context, r Receipt, d time.Duration) (Receipt, error) {
	if d < 0 || d > MaxPopInvisible {
		return Receipt{}, fmt.Errorf("%w: invisibleTime %d ms is not in [0, %d]", ErrPopInvalid, d.Milliseconds(), MaxPopInvisible.Milliseconds())
	}
	if err := b.popBarrier(ctx); err != nil {
		return Receipt{}, err
	}
	out, err := b.popOps(ctx, []pop.Op{{Type: pop.OpChange, Group: r.Group, Topic: r.Topic, Queue: r.QueueID, Offset: r.Offset,
		PopTime: r.PopTime, Invisible: d.Milliseconds()}}, nil)
	if err != nil {
		return Receipt{}, err
	}
	if out[0].Err != nil {
		return Receipt{}, out[0].Err
	}
	r.PopTime, r.Invisible, r.StartOffset = out[0].PopTime, d.Milliseconds(), r.Offset
	return r, nil
}

// PopPeek reads up to max messages of a group's queue from its pop cursor
// without hiding them (leader only).
func (b *Broker) PopPeek(ctx context.Context, group, topic string, queueID int32, maxMsgs int) ([][]byte, error) {
	if maxMsgs <= 0 || maxMsgs > remoting.PopMaxMessages {
		return nil, fmt.Errorf("%w: the max message num of peek is %d, not in [1, %d]", ErrPopInvalid, maxMsgs, remoting.PopMaxMessages)
	}
	if queueID < 0 {
		return nil, fmt.Errorf("%w: queueId %d", ErrPopInvalid, queueID)
	}
	if _, _, err := b.popCheck(group, topic, queueID); err != nil {
		return nil, err
	}
	if err := b.popBarrier(ctx); err != nil {
		return nil, err
	}
	st := b.rep.Store()
	from := st.MinOffset(topic, queueID)
	if v := st.PopView(pop.Key{Group: group, Topic: topic, Queue: queueID}, 0, 0); v.Exists {
		from = v.Next
	} else if off, ok := st.ConsumerOffset(group, topic, queueID); ok {
		from = off
	}
	gr, err := st.GetMessages(topic, queueID, from, maxMsgs, popMaxBytes, nil)
	if err != nil {
		return nil, err
	}
	if gr.Status != store.Found {
		return nil, nil
	}
	return gr.Records, nil
}

// popAvailable reports whether a pop of group in topic (queue q, < 0:
// any) would find something: a revived record, or messages past a cursor.
func (b *Broker) popAvailable(group, topic string, q int32) bool {
	st := b.rep.Store()
	tc, ok := st.Topic(topic)
	if !ok {
		return false
	}
	queues := []int32{q}
	if q < 0 {
		queues = nil
		for i := range tc.ReadQueueNums {
			queues = append(queues, i)
		}
	}
	for _, qi := range queues {
		maxOff := st.MaxOffset(topic, qi)
		v := st.PopView(pop.Key{Group: group, Topic: topic, Queue: qi}, 1, math.MaxInt64)
		switch {
		case !v.Exists && maxOff > st.MinOffset(topic, qi):
			return true
		case v.Exists && (v.Next < maxOff || len(v.Revived) > 0):
			return true
		}
	}
	return false
}

// popReviveLoop revives, while the node leads, the records whose invisible
// time passed: visible again, or past the group's retryMaxTimes moved to
// its dead-letter topic.
func (b *Broker) popReviveLoop() {
	var gs goneScan
	b.whileLeader(popReviveTick, func(ctx context.Context) bool {
		b.dropGone(ctx, &gs)
		b.reviveDue(ctx, time.Now().UnixMilli())
		return true
	})
}

// popGoneFull is how often the leader looks again at every queue for
// records of deleted messages, not only at the queues retention moved
// since it last looked (a pop can record a message retention deletes
// while the pop is under way).
const popGoneFull = 30 * time.Second

// goneScan is the revive loop's record of the queues it found free of
// records of deleted messages, by first readable offset: a queue is
// walked again only once retention moves that offset, or after
// popGoneFull, or in a new term.
type goneScan struct {
	clean map[pop.Key]int64
	term  uint64
	since time.Time
}

// dropGone proposes dropping the records whose messages retention deleted
// (pop.OpDrop): such a message can be delivered no more (in RocketMQ too,
// a message gone from the log is gone), and its record would otherwise
// stay in flight for ever and hold the group's consumer offset back. Only
// the leader decides, from its own queues, and the drop is replicated:
// followers never drop on their own.
func (b *Broker) dropGone(ctx context.Context, gs *goneScan) {
	st := b.rep.Store()
	if term := b.rep.Node().Status().Term; gs.clean == nil || term != gs.term || time.Since(gs.since) > popGoneFull {
		gs.clean, gs.term, gs.since = map[pop.Key]int64{}, term, time.Now()
	}
	gone, walked := st.PopGone(popReviveMax, func(k pop.Key, minOff int64) bool {
		off, ok := gs.clean[k]
		return ok && off == minOff
	})
	markClean := func() {
		n := 0
		for _, recs := range gone {
			n += len(recs)
		}
		if n >= popReviveMax {
			return // cut short: look again at the next tick
		}
		for k, off := range walked {
			gs.clean[k] = off
		}
	}
	if len(gone) == 0 {
		markClean()
		return
	}
	var ops []pop.Op
	for k, recs := range gone {
		for _, r := range recs {
			ops = append(ops, pop.Op{Type: pop.OpDrop, Group: k.Group, Topic: k.Topic, Queue: k.Queue, Offset: r.Offset, PopTime: r.PopTime})
		}
	}
	rctx, cancel := context.WithTimeout(ctx, b.cfg.SendTimeout)
	defer cancel()
	out, err := b.popOps(rctx, ops, nil)
	if err != nil {
		b.log.Debug("cluster: pop: drop of deleted messages not applied; retried at the next tick", "ops", len(ops), "err", err)
		return
	}
	if !slices.ContainsFunc(out, func(r pop.Result) bool { return r.Err != nil }) {
		markClean()
	}
	type span struct {
		n           int
		first, last int64
	}
	spans := map[pop.Key]*span{}
	for i, r := range out {
		if !r.Dropped {
			continue
		}
		b.met.PopDropped.Inc()
		k, off := ops[i].Key(), ops[i].Offset
		if sp := spans[k]; sp != nil {
			sp.n, sp.first, sp.last = sp.n+1, min(sp.first, off), max(sp.last, off)
		} else {
			spans[k] = &span{1, off, off}
		}
	}
	for k, sp := range spans {
		b.log.Warn("cluster: pop: popped messages deleted by retention before they were acked; their records are dropped",
			"group", k.Group, "topic", k.Topic, "queue", k.Queue, "count", sp.n, "first_offset", sp.first, "last_offset", sp.last)
	}
}

// reviveDue proposes the revival of the records due at nowMs and waits
// for it.
func (b *Broker) reviveDue(ctx context.Context, nowMs int64) {
	st := b.rep.Store()
	due := st.PopDue(nowMs, popReviveMax)
	if len(due) == 0 {
		return
	}
	var ops []pop.Op
	var dlq []*message.Message
	anyDLQ := false
	for k, recs := range due {
		if ctx.Err() != nil {
			return
		}
		if _, ok := st.Topic(k.Topic); !ok {
			continue // the topic was deleted: its pop state is inert
		}
		maxTimes := int32(offsets.NewSubscriptionGroupConfig(k.Group).RetryMaxTimes)
		if gc, ok := st.SubscriptionGroup(k.Group); ok {
			maxTimes = gc.RetryMaxTimes
		}
		if failpoint.On(b.fp, failpoint.AckInMemory) {
			recs = b.unackedInMemory(k, recs)
		}
		for _, r := range recs {
			op := pop.Op{Type: pop.OpRevive, Group: k.Group, Topic: k.Topic, Queue: k.Queue, Offset: r.Offset, PopTime: r.PopTime}
			var copyMsg *message.Message
			if r.Attempt > maxTimes {
				m, err := b.popDeadLetter(ctx, k, r)
				if err != nil {
					b.log.Warn("cluster: pop: dead-letter copy failed; revived instead", "group", k.Group, "topic", k.Topic, "queue", k.Queue, "offset", r.Offset, "err", err)
				} else {
					op.DLQ, copyMsg, anyDLQ = true, m, true
				}
			}
			ops = append(ops, op)
			dlq = append(dlq, copyMsg)
		}
	}
	if len(ops) == 0 {
		return
	}
	if !anyDLQ {
		dlq = nil
	}
	rctx, cancel := context.WithTimeout(ctx, b.cfg.SendTimeout)
	defer cancel()
	out, err := b.popOps(rctx, ops, dlq)
	if err != nil {
		b.log.Debug("cluster: pop: revive not applied; retried at the next tick", "ops", len(ops), "err", err)
		return
	}
	revived, dead := 0, 0
	for i, r := range out {
		switch {
		case r.Err != nil:
		case r.DLQ:
			dead++
			b.log.Info("cluster: popped message moved to the dead-letter queue", "group", ops[i].Group, "topic", ops[i].Topic,
				"queue", ops[i].Queue, "offset", ops[i].Offset)
		default:
			revived++
		}
	}
	b.met.PopRevived.WithLabelValues("visible").Add(float64(revived))
	b.met.PopRevived.WithLabelValues("dlq").Add(float64(dead))
}

// popDeadLetter builds the dead-letter copy of a popped message, creating
// the group's %DLQ% topic through raft if missing.
func (b *Broker) popDeadLetter(ctx context.Context, k pop.Key, r pop.Record) (*message.Message, error) {
	st := b.rep.Store()
	gr, err := st.GetMessages(k.Topic, k.Queue, r.Offset, 1, popMaxBytes, nil)
	if err != nil {
		return nil, err
	}
	if gr.Status != store.Found || gr.QueueOffsets[0] != r.Offset {
		return nil, fmt.Errorf("message at %d is gone (%v)", r.Offset, gr.Status)
	}
	orig, _, err := message.Decode(gr.Records[0])
	if err != nil {
		return nil, err
	}
	topic := DLQGroupTopic(k.Group)
	if _, ok := st.Topic(topic); !ok {
		tc := dlqTopicConfig(topic)
		if err := b.exec(ctx, &store.Command{Op: store.OpCreateTopic, Topic: &tc}); err != nil {
			return nil, fmt.Errorf("create dead-letter topic %s: %w", topic, err)
		}
	}
	props := maps.Clone(orig.Properties)
	if props == nil {
		props = map[string]string{}
	}
	delete(props, message.PropertyPopCK)
	props[message.PropertyDLQOriginTopic] = k.Topic
	id := props[message.PropertyUniqKey]
	if id == "" {
		id = message.OffsetMsgID(orig.StoreHost, orig.PhysicalOffset)
	}
	props[message.PropertyDLQOriginMessageID] = id
	if props[message.PropertyOriginMessageID] == "" {
		props[message.PropertyOriginMessageID] = id
	}
	if props[message.PropertyRetryTopic] == "" {
		props[message.PropertyRetryTopic] = k.Topic
	}
	return &message.Message{Topic: topic, QueueID: 0, Flag: orig.Flag, SysFlag: orig.SysFlag, BornTimestamp: orig.BornTimestamp,
		BornHost: orig.BornHost, ReconsumeTimes: r.Attempt, Body: orig.Body, Properties: props}, nil
}

// pollKey names a long-polling pop for POLLING_INFO.
func pollKey(group, topic string, q int32) string {
	return group + "@" + topic + "@" + strconv.Itoa(int(q))
}

// polling counts a suspended pop in (delta 1) or out (-1) and returns the
// count.
func (p *popState) polling1(key string, delta int) int {
	p.pollMu.Lock()
	defer p.pollMu.Unlock()
	n := p.polling[key] + delta
	if n <= 0 {
		delete(p.polling, key)
		return 0
	}
	p.polling[key] = n
	return n
}
