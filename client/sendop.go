package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/raftmq/raftmq/protocol/remoting"
)

// step is what a send does after an attempt.
type step int

const (
	stepDone     step = iota // stored; results filled
	stepFail                 // give up with lastErr
	stepRetry                // retry after a backoff
	stepRetryNow             // retry at once (towards a leader the broker named)
)

// sendOp is one Send, SendBatch or SendAsync: the request, built once and
// re-sent unchanged (same UNIQ_KEYs) by every attempt, and the retry state.
// Attempts run one at a time; an async op passes from the SendAsync
// caller to the connection's reader or a timer goroutine and on, each
// hand-off ordered by the remoting pending table or the timer.
type sendOp struct {
	p     *Producer
	topic string
	queue int32 // as given: a queue or AnyQueue
	flag  int32
	batch bool
	// extra are header fields of special sends (half messages, retry
	// copies); zero for ordinary ones.
	extra sendExtra
	props string // single message: encoded properties
	body  []byte // message body, or batch body
	req   *remoting.Command

	res    []SendResult // one per message; MsgIDs set at creation
	resBuf [1]SendResult

	attempt int
	// unknown is set once an attempt's outcome was indeterminate; from
	// then on a failure is reported as indeterminate.
	unknown bool
	lastErr error
	// avoid is the address of the last failed attempt; refreshAfter, if
	// set, requires a route fetched after it.
	avoid        string
	refreshAfter time.Time
	// topicMissing is set once the broker answered TOPIC_NOT_EXIST; a
	// route query answering the same then ends the send.
	topicMissing bool

	// Async only.
	ctx  context.Context
	cb   func(SendResult, error)
	addr string
	conn *poolConn
	// A pack of auto-batched messages: one callback per message (instead
	// of cb), and the batcher to tell when done.
	cbs     []func(SendResult, error)
	auto    *autoBatcher
	autoKey queueKey // the auto-batched pack's queue
}

// prepare gets a route (the cached one, or one fetched after
// refreshAfter), builds the request on the first attempt, and returns the
// address for this attempt.
func (op *sendOp) prepare(ctx context.Context) (string, error) {
	c := op.p.c
	if c.closed.Load() {
		return "", ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	newer := op.refreshAfter
	if newer.IsZero() {
		newer = time.Now().Add(-routeTTL)
	}
	r, err := c.route(ctx, op.topic, newer, true)
	if err != nil {
		var e *Error
		if !errors.As(err, &e) || e.Code != remoting.TopicNotExist || op.topicMissing {
			return "", err
		}
		// No node knows the topic yet. Send anyway: a broker that
		// auto-creates topics creates it; otherwise it answers
		// TOPIC_NOT_EXIST and the next route query ends the send.
	}
	if op.req == nil {
		op.build(r)
	}
	return c.writeTarget(op.avoid), nil
}

// build makes the request, choosing the queue from r if the caller did
// not. Without a route the broker chooses.
func (op *sendOp) build(r *Route) {
	queue := op.queue
	if queue == AnyQueue && r != nil && r.WriteQueues > 0 {
		queue = int32((op.p.rr.Add(1) - 1) % uint32(r.WriteQueues))
	}
	h := remoting.SendMessageRequestHeader{
		ProducerGroup:         op.p.group,
		Topic:                 op.topic,
		DefaultTopic:          DefaultTopicTemplate,
		DefaultTopicQueueNums: defaultTopicQueueNums,
		QueueID:               queue,
		BornTimestamp:         time.Now().UnixMilli(),
		Flag:                  op.flag,
		Properties:            op.props,
		SysFlag:               op.extra.sysFlag,
		ReconsumeTimes:        op.extra.reconsumeTimes,
		MaxReconsumeTimes:     op.extra.maxReconsumeTimes,
	}
	// Like the Java client: SEND_MESSAGE_V2's short field names (batches
	// as SEND_BATCH_MESSAGE), in the ROCKETMQ binary header encoding,
	// which both ends encode and decode in a fraction of JSON's time.
	code := remoting.SendMessageV2
	if op.batch {
		h.Flag, h.Batch = 0, true
		code = remoting.SendBatchMessage
	}
	// The header is encoded straight into the frame, without a map.
	op.req = remoting.NewRequest(code, nil, op.body)
	op.req.Header = h.V2()
	op.req.Serialize = remoting.SerializeRocketMQ
}

// prepareFailed decides after prepare failed.
func (op *sendOp) prepareFailed(ctx context.Context, err error) step {
	if op.lastErr == nil || ctx.Err() == nil {
		op.lastErr = err
	}
	var e *Error
	switch {
	case errors.Is(err, ErrClosed), ctx.Err() != nil:
		return stepFail
	case errors.As(err, &e) && e.Code == remoting.TopicNotExist:
		return stepFail
	}
	return stepRetry // no node answered the route query
}

// handle decides after an attempt to addr answered resp or failed with err.
// written says whether the request may have reached the broker.
func (op *sendOp) handle(ctx context.Context, addr string, resp *remoting.Command, err error, written bool) step {
	c := op.p.c
	if err != nil {
		op.lastErr = err
		if written {
			op.unknown = true
		}
		switch {
		case errors.Is(err, ErrClosed), c.closed.Load(), ctx.Err() != nil:
			return stepFail
		case !written && (errors.Is(err, remoting.ErrFrameTooLarge) || errors.Is(err, remoting.ErrMalformed)):
			return stepFail
		}
		c.leaderFailed(addr)
		op.avoid, op.refreshAfter = addr, time.Now()
		return stepRetry
	}
	if resp.Code == remoting.Success {
		if err := op.decode(addr, resp); err != nil {
			// Stored, but the answer is unreadable: report it as unknown.
			op.lastErr, op.unknown = err, true
			return stepFail
		}
		return stepDone
	}
	e := responseError(addr, resp)
	op.lastErr = e
	switch e.Code {
	case remoting.ServiceNotAvailable:
		op.avoid = addr
		if hint, ok := e.LeaderHint(); ok && hint != addr {
			c.setLeader(hint)
			return stepRetryNow
		}
		c.leaderFailed(addr)
		op.refreshAfter = time.Now()
		return stepRetry
	case remoting.SystemError:
		op.unknown = true
		op.refreshAfter = time.Now()
		return stepRetry
	case remoting.SystemBusy:
		return stepRetry
	case remoting.NoPermission:
		op.refreshAfter = time.Now()
		return stepRetry
	case remoting.TopicNotExist:
		op.topicMissing = true
		op.refreshAfter = time.Now()
		return stepRetry
	}
	return stepFail
}

// decode fills the results from a success response.
func (op *sendOp) decode(addr string, resp *remoting.Command) error {
	h, err := remoting.DecodeSendMessageResponseHeader(resp.ExtFields)
	if err != nil {
		return fmt.Errorf("client: send answer from %s: %w: %w", addr, ErrProtocol, err)
	}
	dup := h.Duplicate
	if len(op.res) == 1 {
		r := &op.res[0]
		r.OffsetMsgID, r.QueueID, r.QueueOffset, r.Duplicate = h.MsgID, h.QueueID, h.QueueOffset, dup
		return nil
	}
	ids := strings.Split(h.MsgID, ",")
	if len(ids) != len(op.res) {
		return fmt.Errorf("client: batch answer from %s has %d message ids for %d messages: %w",
			addr, len(ids), len(op.res), ErrProtocol)
	}
	for i := range op.res {
		r := &op.res[i]
		r.OffsetMsgID, r.QueueID, r.QueueOffset, r.Duplicate = ids[i], h.QueueID, h.QueueOffset+int64(i), dup
	}
	return nil
}

// retryDelay returns the pause before the next attempt, or false when the
// retries are exhausted.
func (op *sendOp) retryDelay(s step) (time.Duration, bool) {
	p := op.p
	if op.attempt > p.retries {
		return 0, false
	}
	if s == stepRetryNow {
		return 0, true
	}
	return backoff(op.attempt, p.backoff, p.maxBack, p.c.ids.jitter), true
}

// logRetry notes a retry at debug level.
func (op *sendOp) logRetry(delay time.Duration) {
	op.p.c.log.Debug("client: retrying send", "topic", op.topic, "msgId", op.res[0].MsgID,
		"attempt", op.attempt, "delay", delay, "unknown", op.unknown, "err", op.lastErr)
}

// finalErr is the error of a failed op: it wraps ErrIndeterminate if any
// attempt's outcome was unknown, and ctx's error if ctx ended the op.
func (op *sendOp) finalErr(ctx context.Context) error {
	err := op.lastErr
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = fmt.Errorf("%w; last attempt: %w", cerr, err)
	}
	what := "send"
	if op.batch {
		what = fmt.Sprintf("send batch of %d", len(op.res))
	}
	if op.unknown && !errors.Is(err, ErrIndeterminate) {
		return fmt.Errorf("client: %s %s to %s: %d attempts, an earlier one with unknown outcome (%w): %w",
			what, op.res[0].MsgID, op.topic, op.attempt, ErrIndeterminate, err)
	}
	return fmt.Errorf("client: %s %s to %s: %d attempts: %w", what, op.res[0].MsgID, op.topic, op.attempt, err)
}

// attemptAsync makes one attempt of an async op. It runs on the
// SendAsync caller's goroutine first, then on timer goroutines, and may
// block on a route fetch or a dial.
func (op *sendOp) attemptAsync() {
	op.attempt++
	ctx, c := op.ctx, op.p.c
	addr, err := op.prepare(ctx)
	if err != nil {
		op.afterAsync(op.prepareFailed(ctx, err))
		return
	}
	conn, err := c.pool.get(ctx, addr)
	if err != nil {
		op.afterAsync(op.handle(ctx, addr, nil, err, false))
		return
	}
	timeout := c.timeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = max(min(timeout, time.Until(dl)), time.Millisecond)
	}
	op.addr, op.conn = addr, conn
	if err := conn.InvokeAsync(op.req, timeout, op.onResponse); err != nil {
		// Not queued: the callback will not run.
		op.afterAsync(op.handle(ctx, addr, nil, err, false))
	}
	// Otherwise op now belongs to the callback.
}

// onResponse is the InvokeAsync callback.
func (op *sendOp) onResponse(resp *remoting.Command, err error) {
	if err != nil && errors.Is(err, remoting.ErrTimeout) {
		op.p.c.pool.evict(op.addr, op.conn)
	}
	op.afterAsync(op.handle(op.ctx, op.addr, resp, err, err != nil))
}

// afterAsync finishes the op or schedules its next attempt.
func (op *sendOp) afterAsync(s step) {
	switch s {
	case stepDone:
		op.finish(nil)
		return
	case stepFail:
		op.finish(op.finalErr(op.ctx))
		return
	}
	delay, ok := op.retryDelay(s)
	if !ok {
		op.finish(op.finalErr(op.ctx))
		return
	}
	op.logRetry(delay)
	time.AfterFunc(delay, op.attemptAsync)
}

// finish calls the callback (or each message's) and frees the op's window
// slots.
func (op *sendOp) finish(err error) {
	if op.auto != nil {
		cbs := op.cbs
		op.cbs = nil
		for i, cb := range cbs {
			cb(op.res[i], err)
		}
		for range cbs {
			<-op.p.sem
		}
		op.auto.done(op.autoKey)
		return
	}
	cb := op.cb
	op.cb = nil
	if cb != nil {
		cb(op.res[0], err)
	}
	<-op.p.sem
}
