package client

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/raftmq/raftmq/message"
)

// Pull pacing.
const (
	// minEmptyPull: an empty long-poll answered sooner than this is
	// followed by a pause up to it, so that a broker that does not hold
	// pulls is not polled in a busy loop.
	minEmptyPull = 100 * time.Millisecond
	// pullBackoff and pullBackoffMax bound the pause after a failed pull
	// or offset lookup (RocketMQ pauses 3 s).
	pullBackoff    = 100 * time.Millisecond
	pullBackoffMax = 3 * time.Second
)

// queueWorker consumes one owned queue. Its pull goroutine owns the pull
// position and feeds pulled messages into the cache (mu.msgs); a
// concurrent consumer hands each batch to a callback goroutine at once, an
// orderly one has a consume goroutine that takes batches from the head of
// the cache one at a time. The consumed offset ("next offset to consume")
// is the smallest offset still in the cache, or the pull position if the
// cache is empty: it never passes a message not yet consumed.
type queueWorker struct {
	p   *PushConsumer
	mq  MessageQueue
	sub *subscription

	ctx    context.Context // ends when the worker is stopped
	cancel context.CancelFunc
	// pullDone is closed when the pull goroutine returns; consumeDone
	// when the orderly consume goroutine does (at once if concurrent).
	pullDone, consumeDone chan struct{}
	// space (cap 1) is signalled when messages leave the cache; ready
	// (cap 1) when messages enter it.
	space, ready chan struct{}

	mu struct {
		sync.Mutex
		// dropped is set once the queue's final offset is persisted;
		// later results change nothing.
		dropped bool
		// resetTo, when >= 0, is the offset an operator reset the queue
		// to: finish persists it instead of the worker's progress.
		resetTo int64
		// next is the offset of the next pull; -1 until known.
		next int64
		// msgs are pulled messages not yet consumed; order holds their
		// offsets ascending, plus offsets of messages consumed out of
		// order, trimmed from the head.
		msgs  map[int64]*MessageExt
		order []int64
		// retries are the timers of batches waiting for a local retry.
		retries map[*time.Timer]struct{}
		// recorded is the offset last given to the offset store (-1:
		// none), so a callback that does not move it costs no store lock.
		recorded int64
		// lockedAt is when the broker last granted the queue's lock
		// (orderly clustering).
		lockedAt time.Time
	}
}

func newQueueWorker(p *PushConsumer, mq MessageQueue, sub *subscription, lockedAt time.Time) *queueWorker {
	w := &queueWorker{
		p: p, mq: mq, sub: sub,
		pullDone:    make(chan struct{}),
		consumeDone: make(chan struct{}),
		space:       make(chan struct{}, 1),
		ready:       make(chan struct{}, 1),
	}
	w.ctx, w.cancel = context.WithCancel(p.runCtx)
	w.mu.next, w.mu.recorded, w.mu.resetTo = -1, -1, -1
	w.mu.msgs = map[int64]*MessageExt{}
	w.mu.retries = map[*time.Timer]struct{}{}
	w.mu.lockedAt = lockedAt
	return w
}

// start launches the worker's goroutines.
func (w *queueWorker) start() {
	go w.pullLoop()
	if w.p.o.Orderly {
		go w.consumeLoop()
	} else {
		close(w.consumeDone)
	}
}

// stop makes the worker's goroutines return (the orderly one after its
// current callback) and cancels pending local retries. It does not wait.
func (w *queueWorker) stop() {
	w.cancel()
	w.mu.Lock()
	defer w.mu.Unlock()
	for t := range w.mu.retries {
		t.Stop()
	}
	clear(w.mu.retries)
}

// finish runs after stop when the queue is dropped: it waits for the
// worker's goroutines, freezes its offset, persists it, and releases the
// broker lock if orderly.
func (w *queueWorker) finish() {
	<-w.pullDone
	<-w.consumeDone
	w.mu.Lock()
	w.mu.dropped = true
	resetTo := w.mu.resetTo
	w.mu.Unlock()
	p := w.p
	if resetTo >= 0 {
		p.store.update(w.mq, resetTo)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), p.c.timeout*adminAttempts)
	defer cancel()
	if err := p.store.persist(ctx, []MessageQueue{w.mq}); err != nil {
		p.log.Warn("client: persisting a dropped queue's offset failed", "queue", w.mq, "err", err)
	}
	p.store.forget(w.mq)
	if p.locking() {
		if err := p.unlockBatch(ctx, []MessageQueue{w.mq}); err != nil {
			p.log.Warn("client: unlocking a dropped queue failed; its lock expires on the broker", "queue", w.mq, "err", err)
		}
	}
}

// signal wakes a goroutine waiting on c (cap 1) without blocking.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// committedLocked returns the consumed offset, or -1 if not yet known.
func (w *queueWorker) committedLocked() int64 {
	i := 0
	for i < len(w.mu.order) {
		if _, ok := w.mu.msgs[w.mu.order[i]]; ok {
			break
		}
		i++
	}
	w.mu.order = w.mu.order[i:]
	if len(w.mu.order) > 0 {
		return w.mu.order[0]
	}
	return w.mu.next
}

// commitLocked records the consumed offset in the offset store, unless
// the queue was dropped.
func (w *queueWorker) commitLocked() {
	if w.mu.dropped {
		return
	}
	if off := w.committedLocked(); off >= 0 && off != w.mu.recorded {
		w.p.store.update(w.mq, off)
		w.mu.recorded = off
	}
}

// lockValid reports whether the queue's lock is fresh enough to consume
// (always, unless orderly clustering).
func (w *queueWorker) lockValid(now time.Time) bool {
	if !w.p.locking() {
		return true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return now.Sub(w.mu.lockedAt) <= w.p.o.LockMaxAge
}

// renewed records a granted lock renewal.
func (w *queueWorker) renewed(now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mu.lockedAt = now
}

// pullLoop finds the start offset, then pulls until stopped.
func (w *queueWorker) pullLoop() {
	defer close(w.pullDone)
	off, ok := w.startOffset()
	if !ok {
		return
	}
	w.mu.Lock()
	w.mu.next = off
	w.mu.Unlock()
	failures := 0
	for w.waitSpace() {
		if w.pull() {
			failures = 0
			continue
		}
		failures++
		if sleep(w.ctx, backoff(failures, pullBackoff, pullBackoffMax, w.p.c.ids.jitter)) != nil {
			return
		}
	}
}

// startOffset returns where to start: the stored offset, or where
// ConsumeFrom says if none is stored. It retries failures until stopped.
func (w *queueWorker) startOffset() (int64, bool) {
	for attempt := 1; ; attempt++ {
		off, err := w.computeStart()
		if err == nil {
			w.p.log.Debug("client: queue starts", "queue", w.mq, "offset", off)
			return off, true
		}
		if w.ctx.Err() != nil {
			return 0, false
		}
		w.p.log.Warn("client: finding a queue's start offset failed", "queue", w.mq, "err", err)
		if sleep(w.ctx, backoff(attempt, pullBackoff, pullBackoffMax, w.p.c.ids.jitter)) != nil {
			return 0, false
		}
	}
}

func (w *queueWorker) computeStart() (int64, error) {
	p, mq := w.p, w.mq
	ctx, cancel := context.WithTimeout(w.ctx, p.c.timeout*adminAttempts)
	defer cancel()
	off, ok, err := p.store.read(ctx, mq)
	if err != nil || ok {
		return off, err
	}
	switch p.o.ConsumeFrom {
	case ConsumeFromFirstOffset:
		return 0, nil
	case ConsumeFromTimestamp:
		at := p.o.ConsumeTimestamp
		if at.IsZero() {
			at = time.Now().Add(-DefaultConsumeTimestampAgo)
		}
		return p.c.SearchOffset(ctx, mq.Topic, mq.QueueID, at)
	}
	if w.sub.retry {
		return 0, nil
	}
	return p.c.MaxOffset(ctx, mq.Topic, mq.QueueID)
}

// waitSpace waits until the cache has room for another pull (flow
// control); false when stopped.
func (w *queueWorker) waitSpace() bool {
	for {
		w.mu.Lock()
		full := len(w.mu.msgs) >= w.p.o.QueueCacheSize
		if !full && !w.p.o.Orderly {
			if c := w.committedLocked(); c >= 0 && w.mu.next-c > int64(w.p.o.MaxSpan) {
				full = true
			}
		}
		w.mu.Unlock()
		if !full {
			return w.ctx.Err() == nil
		}
		select {
		case <-w.space:
		case <-w.ctx.Done():
			return false
		}
	}
}

// pull makes one long-polling pull and handles its answer; false if it
// failed.
func (w *queueWorker) pull() bool {
	p := w.p
	w.mu.Lock()
	req := PullRequest{
		Topic: w.mq.Topic, Queue: w.mq.QueueID, Offset: w.mu.next, Max: p.o.PullBatchSize,
		LongPoll: p.o.LongPoll, Expression: w.sub.expr, ExpressionType: w.sub.typ,
	}
	if p.o.Model == Clustering {
		// As RocketMQ's clients: the pull also commits the consumed
		// offset, when there is one to commit.
		if c := w.committedLocked(); c > 0 {
			req.CommitOffset = c
		}
	}
	w.mu.Unlock()
	start := time.Now()
	res, err := p.pc.PullWith(w.ctx, req)
	if err != nil {
		if w.ctx.Err() == nil {
			p.log.Debug("client: pull failed", "queue", w.mq, "offset", req.Offset, "err", err)
		}
		return false
	}
	if res.NextBeginOffset < 0 {
		p.log.Warn("client: pull answer with a negative next offset", "queue", w.mq, "next", res.NextBeginOffset, "addr", res.Addr)
		return false
	}
	switch res.Status {
	case Found:
		for _, m := range res.Messages {
			m.pulledFrom = res.Addr
		}
		w.deliver(res.Messages, res.NextBeginOffset)
		return true
	case OffsetMoved:
		p.log.Warn("client: pull offset moved", "queue", w.mq, "from", req.Offset, "to", res.NextBeginOffset)
	case NoNewMessages:
		defer func() { _ = sleep(w.ctx, minEmptyPull-time.Since(start)) }()
	}
	w.mu.Lock()
	w.mu.next = res.NextBeginOffset
	w.commitLocked()
	w.mu.Unlock()
	return true
}

// deliver adds pulled messages to the cache, moves the pull position to
// next, and hands the messages to callbacks (concurrent) or wakes the
// consume goroutine (orderly). Messages the subscription filters out are
// skipped; retry-topic messages get their original topic back.
func (w *queueWorker) deliver(pulled []*MessageExt, next int64) {
	msgs := pulled[:0:0]
	for _, m := range pulled {
		if !w.sub.matches(m) {
			continue
		}
		if w.sub.retry {
			if t, ok := m.Property(message.PropertyRetryTopic); ok && t != "" {
				m.Topic = t
			}
		}
		msgs = append(msgs, m)
	}
	w.mu.Lock()
	if w.mu.dropped {
		w.mu.Unlock()
		return
	}
	fresh := msgs[:0]
	for _, m := range msgs {
		if _, dup := w.mu.msgs[m.QueueOffset]; dup || m.QueueOffset < w.mu.next {
			continue
		}
		w.mu.msgs[m.QueueOffset] = m
		w.mu.order = append(w.mu.order, m.QueueOffset)
		fresh = append(fresh, m)
	}
	w.mu.next = max(w.mu.next, next)
	w.commitLocked()
	w.mu.Unlock()
	if w.p.o.Orderly {
		signal(w.ready)
		return
	}
	for batch := range slices.Chunk(fresh, w.p.o.ConsumeBatchSize) {
		if !w.submit(batch) {
			return
		}
	}
}

// submit runs a concurrent batch's callback on a goroutine of its own
// once a callback slot is free; false if the worker stopped first.
func (w *queueWorker) submit(batch []*MessageExt) bool {
	p := w.p
	select {
	case p.sem <- struct{}{}:
	case <-w.ctx.Done():
		return false
	}
	if !p.beginCallback() {
		<-p.sem
		return false
	}
	go func() {
		defer p.cbs.wg.Done()
		res := p.call(batch)
		<-p.sem
		w.consumed(batch, res)
	}()
	return true
}

// consumed applies a concurrent batch's result. Success removes the batch
// from the cache (which may advance the consumed offset). A batch whose
// callback asked to retry goes back to the broker message by message
// (sendBack: CONSUMER_SEND_MSG_BACK, else a send to the retry topic); the
// messages the broker took count as consumed, the others are delivered
// again after RetryDelay and stay in the cache meanwhile, holding the
// offset back. Broadcasting consumers do not retry, as in RocketMQ: the
// failure is logged and the batch counts as consumed. A worker stopped
// before the result arrives changes nothing: the batch stays unconsumed
// and the queue's next owner gets it again.
func (w *queueWorker) consumed(batch []*MessageExt, res ConsumeResult) {
	p := w.p
	if res != ConsumeSuccess && p.o.Model == Broadcasting {
		p.log.Warn("client: broadcast messages failed to consume; broadcasting does not retry",
			"queue", w.mq, "offset", batch[0].QueueOffset, "count", len(batch))
		res = ConsumeSuccess
	}
	done := batch
	var failed []*MessageExt
	if res != ConsumeSuccess {
		if w.ctx.Err() != nil {
			return // stopped: the batch stays unconsumed
		}
		failed = w.sendBackBatch(batch) // network I/O: not under w.mu
		done = make([]*MessageExt, 0, len(batch)-len(failed))
		for _, m := range batch {
			if !slices.Contains(failed, m) {
				done = append(done, m)
			}
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.dropped {
		return
	}
	if len(done) > 0 {
		for _, m := range done {
			delete(w.mu.msgs, m.QueueOffset)
		}
		w.commitLocked()
		signal(w.space)
	}
	if len(failed) == 0 || w.ctx.Err() != nil {
		return // stopped: the failed messages stay unconsumed
	}
	for _, m := range failed {
		m.ReconsumeTimes++
	}
	w.logRetry(failed, "client: message could not be sent back to the broker; retrying it locally")
	var t *time.Timer
	// The timer's function takes w.mu first, so it sees t assigned.
	t = time.AfterFunc(p.o.RetryDelay, func() {
		w.mu.Lock()
		_, pending := w.mu.retries[t]
		delete(w.mu.retries, t)
		w.mu.Unlock()
		if pending {
			w.submit(failed)
		}
	})
	w.mu.retries[t] = struct{}{}
}

// logRetry notes a batch going back for another local delivery: at error
// level past MaxReconsumeTimes, since the broker would have moved it to
// the dead-letter queue, otherwise at debug level.
func (w *queueWorker) logRetry(batch []*MessageExt, msg string) {
	n := int(batch[0].ReconsumeTimes)
	args := []any{"queue", w.mq, "offset", batch[0].QueueOffset, "count", len(batch), "reconsumeTimes", n, "msgId", batch[0].MsgID}
	if n > w.p.o.MaxReconsumeTimes {
		w.p.log.Error(msg+"; it failed more than MaxReconsumeTimes", args...)
		return
	}
	w.p.log.Debug(msg, args...)
}

// consumeLoop is an orderly queue's consume goroutine: one batch at a
// time from the head of the cache, in queue order. A batch that asks to
// retry stays at the head and is delivered again after SuspendDelay,
// holding the queue back, except for its messages that already failed
// MaxReconsumeTimes times: in clustering those go to the dead-letter
// queue (retryOrderly) and count as consumed. In clustering it consumes
// only while the queue's lock is fresh; when it is not, the run loop
// drops the queue.
func (w *queueWorker) consumeLoop() {
	defer close(w.consumeDone)
	p := w.p
	for {
		batch, ok := w.headBatch()
		if !ok {
			return
		}
		if !w.lockValid(time.Now()) {
			select {
			case p.lost <- w:
			case <-w.ctx.Done():
			}
			return
		}
		select {
		case p.sem <- struct{}{}:
		case <-w.ctx.Done():
			return
		}
		if !p.beginCallback() {
			<-p.sem
			return
		}
		res := p.call(batch)
		<-p.sem
		p.cbs.wg.Done()
		done, suspend := batch, false
		if res != ConsumeSuccess {
			if w.ctx.Err() != nil {
				return // stopped: the batch stays unconsumed
			}
			done, suspend = w.retryOrderly(batch)
		}
		w.mu.Lock()
		for _, m := range done {
			delete(w.mu.msgs, m.QueueOffset)
		}
		w.commitLocked()
		w.mu.Unlock()
		if len(done) > 0 {
			signal(w.space)
		}
		if suspend && sleep(w.ctx, p.o.SuspendDelay) != nil {
			return
		}
	}
}

// retryOrderly handles an orderly batch whose callback asked to retry, as
// RocketMQ's checkReconsumeTimes does: in clustering, a message whose
// ReconsumeTimes reached MaxReconsumeTimes is sent back with delay level
// -1, straight to the dead-letter queue, and is done; every other message,
// and one the broker did not take, gets ReconsumeTimes+1 and stays for
// another delivery after SuspendDelay (suspend). Broadcasting consumers
// keep every message and retry it locally, indefinitely.
func (w *queueWorker) retryOrderly(batch []*MessageExt) (done []*MessageExt, suspend bool) {
	p := w.p
	var again []*MessageExt
	for _, m := range batch {
		if p.o.Model == Clustering && int(m.ReconsumeTimes) >= p.o.MaxReconsumeTimes {
			err := p.sendBack(m, delayLevelDLQ)
			if err == nil {
				p.log.Warn("client: orderly message failed MaxReconsumeTimes times; sent to the dead-letter queue",
					"queue", w.mq, "offset", m.QueueOffset, "msgId", m.MsgID, "reconsumeTimes", m.ReconsumeTimes)
				done = append(done, m)
				continue
			}
			p.log.Warn("client: sending an orderly message to the dead-letter queue failed; retrying it locally",
				"queue", w.mq, "offset", m.QueueOffset, "msgId", m.MsgID, "err", err)
		}
		m.ReconsumeTimes++
		again = append(again, m)
	}
	if len(again) > 0 {
		w.logRetry(again, "client: orderly message will be retried locally")
	}
	return done, len(again) > 0
}

// headBatch waits for messages and returns up to ConsumeBatchSize from
// the head of the cache; false when stopped.
func (w *queueWorker) headBatch() ([]*MessageExt, bool) {
	for {
		w.mu.Lock()
		w.committedLocked() // trims consumed offsets off the head
		n := min(len(w.mu.order), w.p.o.ConsumeBatchSize)
		batch := make([]*MessageExt, 0, n)
		// Messages sent to the dead-letter queue leave gaps behind the
		// head; skip them.
		for _, off := range w.mu.order {
			if len(batch) == n {
				break
			}
			if m, ok := w.mu.msgs[off]; ok {
				batch = append(batch, m)
			}
		}
		w.mu.Unlock()
		if len(batch) > 0 {
			return batch, w.ctx.Err() == nil
		}
		select {
		case <-w.ready:
		case <-w.ctx.Done():
			return nil, false
		}
	}
}
