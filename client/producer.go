package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// Producer defaults.
const (
	DefaultProducerGroup = "DEFAULT_PRODUCER"
	DefaultMaxRetries    = 3
	DefaultBackoff       = 20 * time.Millisecond
	DefaultMaxBackoff    = time.Second
	DefaultWindow        = 1024
	// MaxBatchBody is the largest encoded batch body SendBatch sends: the
	// broker's message size limit.
	MaxBatchBody = message.MaxBodySize
)

// ProducerOptions configure a Producer. Zero fields take the defaults.
type ProducerOptions struct {
	// Group is the producer group named in send headers.
	Group string
	// MaxRetries is how many times a failed send is repeated after the
	// first attempt (default 3; negative means never).
	MaxRetries int
	// Backoff is the pause before the first retry; it doubles per retry up
	// to MaxBackoff, with jitter. Defaults 20 ms and 1 s. A retry towards a
	// leader named by the broker goes out at once.
	Backoff, MaxBackoff time.Duration
	// Window bounds the SendAsync calls in flight (default 1024).
	Window int
	// AutoBatch packs SendAsync messages that wait behind other sends
	// into SEND_BATCH_MESSAGE requests, like RocketMQ 5's autoBatch: a
	// message is sent at once while fewer than AutoBatchRequests packed
	// requests to its queue are in flight; otherwise it joins the pack of
	// messages for
	// the same topic, queue (or AnyQueue) and ctx, which goes out as one
	// request when a request slot frees. So a lone send is not delayed,
	// and under load many sends share one request, one frame and one
	// answer. Each message keeps its own UNIQ_KEY, callback and result;
	// the messages of one pack are stored together, at consecutive
	// offsets of one queue, or not at all (their callbacks then get the
	// same error). Retry topics (%RETRY%...) are never packed.
	AutoBatch bool
	// AutoBatchBytes bounds a pack's encoded size (default 256 KiB); a
	// message larger than that is sent alone.
	AutoBatchBytes int
	// AutoBatchRequests is how many packed requests may be in flight to
	// one queue at once (default 4); the Window bounds the total.
	AutoBatchRequests int
}

// SendResult describes a stored message.
type SendResult struct {
	// MsgID is the message's UNIQ_KEY: the client-side message id.
	MsgID string
	// OffsetMsgID is the broker's id: store host and commit log offset.
	OffsetMsgID string
	QueueID     int32
	QueueOffset int64
	// Duplicate is set when the broker had already stored a message with
	// this UNIQ_KEY (an earlier attempt); the result is that message's.
	Duplicate bool
}

// Producer sends messages to the group's leader: code 10 with V1 headers
// for single messages, code 320 with V2 headers for batches. Every message
// gets a UNIQ_KEY, kept across retries, so the broker stores a retried
// message once. Its methods are safe for concurrent use.
//
// Retries: a retryable answer (SYSTEM_ERROR, SYSTEM_BUSY,
// SERVICE_NOT_AVAILABLE, NO_PERMISSION, TOPIC_NOT_EXIST while a fresh route
// still lists the topic) or a lost answer (timeout, connection loss) leads
// to a route refresh and a retry after a backoff, up to MaxRetries times. A
// SERVICE_NOT_AVAILABLE naming the leader is followed at once. Definite
// errors (MESSAGE_ILLEGAL, INVALID_PARAMETER, ...) are returned at once.
// If any attempt's outcome was unknown and none succeeded, the error wraps
// ErrIndeterminate: the message may be stored. Otherwise it was not.
type Producer struct {
	c       *Client
	group   string
	retries int
	backoff time.Duration
	maxBack time.Duration

	rr  atomic.Uint32 // round-robin queue counter
	sem chan struct{} // one slot per SendAsync in flight
	// flushMu serializes Flush calls, which each take every slot of sem.
	flushMu sync.Mutex
	// auto packs SendAsync messages; nil unless ProducerOptions.AutoBatch.
	auto *autoBatcher
}

// NewProducer returns a producer sending through c.
func (c *Client) NewProducer(o ProducerOptions) *Producer {
	if o.Group == "" {
		o.Group = DefaultProducerGroup
	}
	switch {
	case o.MaxRetries == 0:
		o.MaxRetries = DefaultMaxRetries
	case o.MaxRetries < 0:
		o.MaxRetries = 0
	}
	if o.Backoff <= 0 {
		o.Backoff = DefaultBackoff
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	o.MaxBackoff = max(o.MaxBackoff, o.Backoff)
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	p := &Producer{
		c:       c,
		group:   o.Group,
		retries: o.MaxRetries,
		backoff: o.Backoff,
		maxBack: o.MaxBackoff,
		sem:     make(chan struct{}, o.Window),
	}
	if o.AutoBatch {
		if o.AutoBatchBytes <= 0 {
			o.AutoBatchBytes = DefaultAutoBatchBytes
		}
		if o.AutoBatchRequests <= 0 {
			o.AutoBatchRequests = DefaultAutoBatchRequests
		}
		p.auto = newAutoBatcher(p, min(o.AutoBatchBytes, MaxBatchBody), o.AutoBatchRequests)
	}
	return p
}

// Send sends m and waits until it is stored (quorum-committed) or the
// retries are exhausted. m is not modified. On error the result still
// carries the MsgID (UNIQ_KEY) used, so that a caller can record it or
// send again with it in m.Properties.
func (p *Producer) Send(ctx context.Context, m *Message) (SendResult, error) {
	op, err := p.newOp([]*Message{m}, false)
	if err != nil {
		return SendResult{}, err
	}
	err = p.run(ctx, op)
	return op.res[0], err
}

// sendExtra are send header fields ordinary sends leave zero.
type sendExtra struct {
	// sysFlag: message.SysFlagTransactionPrepared for a half message.
	sysFlag int32
	// reconsumeTimes and maxReconsumeTimes: a consumer's copy of a failed
	// message sent to its group's retry topic.
	reconsumeTimes, maxReconsumeTimes int32
}

// sendWith is Send with extra header fields; never auto-batched.
func (p *Producer) sendWith(ctx context.Context, m *Message, extra sendExtra) (SendResult, error) {
	op, err := p.newOp([]*Message{m}, false)
	if err != nil {
		return SendResult{}, err
	}
	op.extra = extra
	err = p.run(ctx, op)
	return op.res[0], err
}

// SendBatch sends ms, which must share one topic and one queue (or all be
// AnyQueue), as one SEND_BATCH_MESSAGE: they are stored together, in order,
// at consecutive queue offsets. The encoded batch must not exceed
// MaxBatchBody (4 MiB); that and every other validation error is returned
// before anything is sent. Results are in the order of ms.
func (p *Producer) SendBatch(ctx context.Context, ms []*Message) ([]SendResult, error) {
	op, err := p.newOp(ms, true)
	if err != nil {
		return nil, err
	}
	err = p.run(ctx, op)
	return op.res, err
}

// SendAsync starts sending m and returns; cb gets the outcome exactly once,
// with the same retries as Send. It blocks while Window sends are in
// flight, until ctx ends. ctx also bounds the send: no attempt starts
// after it ends, and an attempt's timeout is cut to its deadline. If
// SendAsync returns an error (m invalid, ctx ended while waiting for the
// window), cb is not called.
//
// cb runs on a connection's reader goroutine or a timer goroutine; it must
// not block, nor call Flush or a SendAsync that could block on the window.
// Sends in flight together may be stored in any order.
func (p *Producer) SendAsync(ctx context.Context, m *Message, cb func(SendResult, error)) error {
	if p.auto != nil && packable(m) {
		if err := m.check(); err != nil {
			return fmt.Errorf("client: send: %w", err)
		}
		if err := p.acquire(ctx); err != nil {
			return err
		}
		p.auto.add(ctx, m, cb)
		return nil
	}
	op, err := p.newOp([]*Message{m}, false)
	if err != nil {
		return err
	}
	if err := p.acquire(ctx); err != nil {
		return err
	}
	op.ctx, op.cb = ctx, cb
	op.attemptAsync()
	return nil
}

// acquire takes a window slot for a SendAsync.
func (p *Producer) acquire(ctx context.Context) error {
	select {
	case p.sem <- struct{}{}:
		return nil
	default:
	}
	select {
	case p.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("client: waiting for the send window: %w", ctx.Err())
	}
}

// Flush waits until every SendAsync started before it has called its
// callback, or until ctx ends. SendAsync calls made meanwhile wait.
func (p *Producer) Flush(ctx context.Context) error {
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	n := 0
	defer func() {
		for range n {
			<-p.sem
		}
	}()
	for n < cap(p.sem) {
		select {
		case p.sem <- struct{}{}:
			n++
		case <-ctx.Done():
			return fmt.Errorf("client: flush: %d sends still in flight: %w", cap(p.sem)-n, ctx.Err())
		}
	}
	return nil
}

// run performs op's attempts in the caller's goroutine.
func (p *Producer) run(ctx context.Context, op *sendOp) error {
	for {
		op.attempt++
		var s step
		addr, err := op.prepare(ctx)
		if err != nil {
			s = op.prepareFailed(ctx, err)
		} else {
			resp, written, err := p.c.invoke(ctx, addr, op.req, p.c.timeout)
			s = op.handle(ctx, addr, resp, err, written)
		}
		switch s {
		case stepDone:
			return nil
		case stepFail:
			return op.finalErr(ctx)
		}
		delay, ok := op.retryDelay(s)
		if !ok {
			return op.finalErr(ctx)
		}
		op.logRetry(delay)
		if err := sleep(ctx, delay); err != nil {
			return op.finalErr(ctx)
		}
	}
}

// newOp validates ms and prepares their UNIQ_KEYs and body or properties.
func (p *Producer) newOp(ms []*Message, batch bool) (*sendOp, error) {
	if len(ms) == 0 {
		return nil, errors.New("client: send: no messages")
	}
	for i, m := range ms {
		if m == nil {
			return nil, fmt.Errorf("client: send: message %d is nil", i)
		}
		if err := m.check(); err != nil {
			return nil, fmt.Errorf("client: send: message %d: %w", i, err)
		}
	}
	return p.buildOp(ms, batch)
}

// buildOp is newOp for messages already checked one by one (Message.check):
// the auto-batcher's packs, whose messages SendAsync checked.
func (p *Producer) buildOp(ms []*Message, batch bool) (*sendOp, error) {
	op := &sendOp{p: p, batch: batch, topic: ms[0].Topic, queue: ms[0].QueueID, flag: ms[0].Flag}
	if len(ms) == 1 {
		op.res = op.resBuf[:]
	} else {
		op.res = make([]SendResult, len(ms))
	}
	for i, m := range ms {
		if m.Topic != op.topic || m.QueueID != op.queue {
			return nil, fmt.Errorf("client: send batch: message %d is for %s queue %d, message 0 for %s queue %d",
				i, m.Topic, m.QueueID, op.topic, op.queue)
		}
		id := m.uniqKey()
		if id == "" {
			id = p.c.ids.next()
		}
		op.res[i].MsgID = id
	}
	if !batch {
		m := ms[0]
		var props strings.Builder
		props.Grow(propertiesSizeHint(m))
		m.writeProperties(&props, op.res[0].MsgID)
		if props.Len() > message.MaxPropertiesSize {
			return nil, fmt.Errorf("client: send: properties of %d bytes exceed %d: %w",
				props.Len(), message.MaxPropertiesSize, message.ErrPropertiesTooLarge)
		}
		op.props, op.body = props.String(), m.Body
		return op, nil
	}
	entries := make([]remoting.BatchEntry, len(ms))
	size := 0
	var props strings.Builder
	for i, m := range ms {
		props.Reset()
		props.Grow(propertiesSizeHint(m))
		m.writeProperties(&props, op.res[i].MsgID)
		entries[i] = remoting.BatchEntry{Flag: m.Flag, Body: m.Body, RawProperties: props.String()}
		size += len(m.Body) + props.Len() + 20
	}
	body, err := remoting.AppendBatch(make([]byte, 0, min(size, MaxBatchBody+1)), entries)
	if err != nil {
		return nil, fmt.Errorf("client: send batch: %w", err)
	}
	if len(body) > MaxBatchBody {
		return nil, fmt.Errorf("client: send batch: %d messages encode to %d bytes, limit %d: %w",
			len(ms), len(body), MaxBatchBody, message.ErrMessageTooLarge)
	}
	op.body = body
	return op, nil
}

// propertiesSizeHint estimates the encoded size of m's properties.
func propertiesSizeHint(m *Message) int {
	n := len(message.PropertyUniqKey) + 2 + 32 + len(m.Tags) + 6
	for _, k := range m.Keys {
		n += len(k) + 1
	}
	if len(m.Keys) > 0 {
		n += len(message.PropertyKeys) + 2
	}
	for k, v := range m.Properties {
		n += len(k) + len(v) + 2
	}
	return n
}
