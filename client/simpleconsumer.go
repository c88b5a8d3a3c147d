package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// SimpleConsumer consumes by pop (RocketMQ 5's SimpleConsumer model): it
// receives batches of a group's messages, each hidden from the group for
// an invisible time, and acks each one it processed. A message not acked
// within its invisible time is delivered again, possibly to another
// consumer; ChangeInvisibleDuration extends (or shortens) the time. It
// keeps no state: any number of consumers may share a group and a queue,
// with no rebalancing and no locks. Its methods are safe for concurrent
// use.
type SimpleConsumer struct {
	c     *Client
	group string
	topic string
	opts  SimpleConsumerOptions
	// learned is when the topic's route was last fetched to learn the
	// leader (unix ns; learnLeader).
	learned atomic.Int64
}

// SimpleConsumerOptions tune a SimpleConsumer; the zero value receives
// every message, from any queue, polling up to 20 s.
type SimpleConsumerOptions struct {
	// ExpressionType is "TAG" (or "") or "SQL92"; Expression "" is "*".
	ExpressionType, Expression string
	// Await is how long a Receive waits for a message (long polling);
	// 0: 20 s; negative: it does not wait.
	Await time.Duration
	// QueueID is the queue to receive from; nil: any.
	QueueID *int32
	// FromMax: a group with no position in a queue starts at its last
	// message (RocketMQ's initMode MAX); by default at its first.
	FromMax bool
	// Order asks for orderly (FIFO) delivery: a queue's next message only
	// once the one before is acked (or dead-lettered).
	Order bool
}

// ErrReceiptExpired is wrapped by Ack's and ChangeInvisibleDuration's
// error when the message's receipt is no longer valid: its invisible time
// passed and it was received again, or its invisible time was changed
// with another receipt. Nothing was acked: the message will be (or was)
// delivered again.
var ErrReceiptExpired = errors.New("client: receipt handle expired")

// ReceivedMessage is a message a SimpleConsumer received.
type ReceivedMessage struct {
	*MessageExt
	// Receipt is what acks the message (RocketMQ's POP_CK); a successful
	// ChangeInvisibleDuration replaces it.
	Receipt string
	// Attempt counts deliveries of the message, from 1
	// (MessageExt.ReconsumeTimes + 1).
	Attempt int32
	// InvisibleUntil is when the message becomes visible again unless
	// acked (the broker's clock).
	InvisibleUntil time.Time

	// ck is Receipt parsed when it was ckOf (a batch ack reads it rather
	// than parsing the receipt again).
	ck   remoting.ExtraInfo
	ckOf string
}

// receipt returns m.Receipt parsed.
func (m *ReceivedMessage) receipt() (remoting.ExtraInfo, error) {
	if m.ckOf == m.Receipt && m.ckOf != "" {
		return m.ck, nil
	}
	return remoting.ParseExtraInfo(m.Receipt)
}

// NewSimpleConsumer returns a consumer of group in topic.
func (c *Client) NewSimpleConsumer(group, topic string, opts SimpleConsumerOptions) *SimpleConsumer {
	return &SimpleConsumer{c: c, group: group, topic: topic, opts: opts}
}

// Start announces the consumer to every known node with a heartbeat
// (CONSUME_POP), as RocketMQ's clients do before they pop: the leader
// creates the group's config where it is missing, before it answers. A
// pop of a group without a config is refused
// (SUBSCRIPTION_GROUP_NOT_EXIST). Start fails only if no node accepted the
// heartbeat.
func (sc *SimpleConsumer) Start(ctx context.Context) error {
	id, err := sc.c.newClientID(ctx)
	if err != nil {
		return fmt.Errorf("client: simple consumer %s: %w", sc.group, err)
	}
	typ, expr := sc.opts.ExpressionType, sc.opts.Expression
	if typ == "" {
		typ = "TAG"
	}
	if expr == "" {
		expr = "*"
	}
	cd := remoting.ConsumerData{GroupName: sc.group, ConsumeType: "CONSUME_POP", MessageModel: "CLUSTERING", ConsumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
		SubscriptionDataSet: []remoting.SubscriptionData{{Topic: sc.topic, SubString: expr, ExpressionType: typ, SubVersion: time.Now().UnixNano()}}}
	body, err := (&remoting.HeartbeatData{ClientID: id, ConsumerDataSet: []remoting.ConsumerData{cd}}).Encode()
	if err != nil {
		return fmt.Errorf("client: simple consumer %s: %w", sc.group, err)
	}
	// Every node: the leader among them creates the group.
	if err := sc.c.heartbeatAll(ctx, body); err != nil {
		return fmt.Errorf("client: simple consumer %s: %w", sc.group, err)
	}
	sc.learnLeader(ctx)
	return nil
}

// learnLeader has the client learn the group's leader from the topic's
// route, so that receives and acks go to it: sent to a follower, each is
// forwarded to the leader, a hop more each way (with the leader unknown,
// requests rotate over the nodes, so two of three took it). It fetches
// the route when no leader is known, at most once a second, and every
// route lifetime (30 s); after a leader change, the old leader's
// forwarded answers name the new one (answered), and a failed request
// has the route fetched again (relearnLeader). Best effort: without a
// route, requests go to any node.
func (sc *SimpleConsumer) learnLeader(ctx context.Context) {
	sc.learnLeaderEvery(ctx, routeTTL)
}

// relearnLeader is learnLeader after a request failed (the leader may
// have changed): it fetches the route at most once a second.
func (sc *SimpleConsumer) relearnLeader(ctx context.Context) {
	sc.learnLeaderEvery(ctx, time.Second)
}

// answered looks at the answer to a request sent to addr: a follower
// that forwarded it to the leader names the leader (FieldLeader), which
// later requests then go to. A leader change otherwise leaves the client
// on the old leader, now a follower forwarding, until the route's
// lifetime passed.
func (sc *SimpleConsumer) answered(resp *remoting.Command, addr string) {
	if resp == nil {
		return
	}
	if l := resp.ExtFields[remoting.FieldLeader]; l != "" && l != addr {
		sc.c.setLeader(l)
	}
}

func (sc *SimpleConsumer) learnLeaderEvery(ctx context.Context, every time.Duration) {
	now := time.Now()
	last := sc.learned.Load()
	if sc.c.leaderAddr() == "" {
		every = min(every, time.Second)
	}
	if last != 0 && now.Sub(time.Unix(0, last)) < every {
		return
	}
	if !sc.learned.CompareAndSwap(last, now.UnixNano()) {
		return // another call is fetching
	}
	if _, err := sc.c.route(ctx, sc.topic, now, true); err != nil {
		sc.c.log.Debug("client: simple consumer: route for the leader", "topic", sc.topic, "err", err)
	}
}

// Receive pops up to max (1 to 32) messages, hiding them from the group
// for invisible. It returns none, and no error, when the wait (Await)
// ended without a message. An error wrapping ErrIndeterminate means
// messages may have been hidden: they come back after invisible.
func (sc *SimpleConsumer) Receive(ctx context.Context, max int, invisible time.Duration) ([]*ReceivedMessage, error) {
	await := sc.opts.Await
	if await == 0 {
		await = 20 * time.Second
	}
	await = max0(await)
	sc.learnLeader(ctx)
	q := int32(-1)
	if sc.opts.QueueID != nil {
		q = *sc.opts.QueueID
	}
	init := remoting.PopInitMin
	if sc.opts.FromMax {
		init = remoting.PopInitMax
	}
	mk := func() *remoting.Command {
		h := remoting.PopMessageRequestHeader{ConsumerGroup: sc.group, Topic: sc.topic, QueueID: q, MaxMsgNums: int32(max),
			InvisibleTime: invisible.Milliseconds(), PollTime: await.Milliseconds(), BornTime: time.Now().UnixMilli(), InitMode: init,
			ExpType: sc.opts.ExpressionType, Exp: sc.opts.Expression, Order: sc.opts.Order}
		return remoting.NewRequest(remoting.PopMessage, h.Encode(), nil)
	}
	resp, addr, err := sc.c.invokeLeaderTimeout(ctx, mk, false, sc.c.timeout+await)
	if err != nil {
		sc.relearnLeader(ctx)
		return nil, fmt.Errorf("client: receive %s %s: %w", sc.group, sc.topic, err)
	}
	sc.answered(resp, addr)
	switch resp.Code {
	case remoting.Success:
	case remoting.PollingTimeout, remoting.PullNotFound:
		return nil, nil
	default:
		return nil, fmt.Errorf("client: receive %s %s: %w", sc.group, sc.topic, responseError(addr, resp))
	}
	rh, err := remoting.DecodePopMessageResponseHeader(resp.ExtFields)
	if err != nil {
		return nil, fmt.Errorf("client: receive %s %s: %w: %w", sc.group, sc.topic, ErrProtocol, err)
	}
	out, err := decodeReceived(resp.Body, sc.topic, rh.InvisibleTime)
	if err != nil {
		return nil, fmt.Errorf("client: receive %s %s: %w", sc.group, sc.topic, err)
	}
	return out, nil
}

// decodeReceived decodes the messages of a pop answer of topic, whose
// receives hide them for invisible ms.
func decodeReceived(body []byte, topic string, invisible int64) ([]*ReceivedMessage, error) {
	// One allocation each for the answer's messages and their wrappers;
	// the topic and host strings are made once per answer.
	count := message.CountRecords(body)
	out := make([]*ReceivedMessage, 0, count)
	exts := make([]MessageExt, count)
	rms := make([]ReceivedMessage, count)
	var hosts hostStrings
	for b := body; len(b) > 0; {
		v, err := message.Parse(b, true)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		if string(v.Topic) != topic {
			return nil, fmt.Errorf("%w: record %d is of %s/%d", ErrCorrupt, len(out), v.Topic, v.QueueID)
		}
		if len(out) == count {
			return nil, fmt.Errorf("%w: more than %d records", ErrCorrupt, count)
		}
		m := &exts[len(out)]
		if err := fillMessageExt(m, &v, topic, &hosts); err != nil {
			return nil, fmt.Errorf("%w: record %d: %w", ErrCorrupt, len(out), err)
		}
		b = b[v.Size:]
		ck, ok := m.Property(message.PropertyPopCK)
		if !ok {
			return nil, fmt.Errorf("%w: message without POP_CK", ErrProtocol)
		}
		e, err := remoting.ParseExtraInfo(ck)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrProtocol, err)
		}
		rm := &rms[len(out)]
		*rm = ReceivedMessage{MessageExt: m, Receipt: ck, Attempt: m.ReconsumeTimes + 1,
			InvisibleUntil: time.UnixMilli(e.PopTime + invisible), ck: e, ckOf: ck}
		out = append(out, rm)
	}
	return out, nil
}

func max0(d time.Duration) time.Duration {
	if d < 0 {
		return 0
	}
	return d
}

// Ack acknowledges m: it will not be delivered again. Acking twice is not
// an error. An error wrapping ErrReceiptExpired means m's invisible time
// passed and it was received again (or its receipt was replaced): nothing
// was acked.
func (sc *SimpleConsumer) Ack(ctx context.Context, m *ReceivedMessage) error {
	h := remoting.AckMessageRequestHeader{ConsumerGroup: sc.group, Topic: m.Topic, QueueID: m.QueueID, ExtraInfo: m.Receipt, Offset: m.QueueOffset}
	mk := func() *remoting.Command { return remoting.NewRequest(remoting.AckMessage, h.Encode(), nil) }
	resp, addr, err := sc.c.invokeLeader(ctx, mk, true)
	if err != nil {
		sc.relearnLeader(ctx)
	} else {
		sc.answered(resp, addr)
	}
	if err == nil && resp.Code != remoting.Success {
		err = receiptError(addr, resp)
	}
	if err != nil {
		return fmt.Errorf("client: ack %s %s/%d@%d: %w", sc.group, m.Topic, m.QueueID, m.QueueOffset, err)
	}
	return nil
}

// batchAckSpan bounds the offsets one entry of a batch ack covers: its
// bit set has a bit per offset from its first, so a batch whose offsets
// lie far apart (a revived message beside new ones) takes more entries.
const batchAckSpan = 1024

// AckBatch acknowledges ms in one BATCH_ACK_MESSAGE request (RocketMQ's
// batch ack, one raft entry on the broker) and returns each message's
// outcome: errs[i] is nil when ms[i] was acked (or had been), else an
// error as Ack returns it. The broker answers a batch with one code, so
// when a batch is not answered SUCCESS, AckBatch acks each message of it
// on its own (acks are idempotent) to learn which failed and why.
func (sc *SimpleConsumer) AckBatch(ctx context.Context, ms []*ReceivedMessage) []error {
	errs := make([]error, len(ms))
	if len(ms) == 0 {
		return errs
	}
	body, err := batchAckBody(sc.group, ms)
	if err == nil {
		mk := func() *remoting.Command { return remoting.NewRequest(remoting.BatchAckMessage, nil, body) }
		var (
			resp *remoting.Command
			addr string
		)
		resp, addr, err = sc.c.invokeLeader(ctx, mk, true)
		if err != nil {
			sc.relearnLeader(ctx)
		} else {
			sc.answered(resp, addr)
		}
		if err == nil && resp.Code == remoting.Success {
			return errs
		}
	}
	if err := ctx.Err(); err != nil {
		for i, m := range ms {
			errs[i] = fmt.Errorf("client: ack %s %s/%d@%d: %w", sc.group, m.Topic, m.QueueID, m.QueueOffset, err)
		}
		return errs
	}
	for i, m := range ms {
		errs[i] = sc.Ack(ctx, m)
	}
	return errs
}

// batchAckBody encodes the body of a batch ack of ms: one entry per
// (topic, queue, pop time, invisible time, revive queue, retry flag) and
// span of batchAckSpan offsets, each a bit set of its offsets.
func batchAckBody(group string, ms []*ReceivedMessage) ([]byte, error) {
	type key struct {
		topic           string
		queue, rq, flag int32
		pt, it          int64
	}
	// A received batch is mostly one key (one pop of one queue): a list
	// looked through beats a map.
	var (
		keys []key
		offs [][]int64
	)
	for _, m := range ms {
		e, err := m.receipt()
		if err != nil {
			return nil, fmt.Errorf("client: batch ack: receipt %q: %w: %w", m.Receipt, ErrProtocol, err)
		}
		off := e.QueueOffset
		if off < 0 {
			off = m.QueueOffset
		}
		k := key{topic: m.Topic, queue: m.QueueID, rq: e.ReviveQid, flag: e.TopicFlag, pt: e.PopTime, it: e.InvisibleTime}
		i := slices.Index(keys, k)
		if i < 0 {
			i = len(keys)
			keys = append(keys, k)
			offs = append(offs, make([]int64, 0, len(ms)))
		}
		offs[i] = append(offs[i], off)
	}
	var body remoting.BatchAckBody
	for i, k := range keys {
		offsets := offs[i]
		slices.Sort(offsets)
		for len(offsets) > 0 {
			n := 1
			for n < len(offsets) && offsets[n]-offsets[0] < batchAckSpan {
				n++
			}
			a := remoting.BatchAck{ConsumerGroup: group, Topic: k.topic, RetryFlag: strconv.Itoa(int(k.flag)), StartOffset: offsets[0],
				QueueID: k.queue, ReviveQueueID: k.rq, PopTime: k.pt, InvisibleTime: k.it}
			a.SetOffsets(offsets[:n])
			body.Acks = append(body.Acks, a)
			offsets = offsets[n:]
		}
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("client: batch ack: %w", err)
	}
	return b, nil
}

// ChangeInvisibleDuration hides m for d from now on (0: visible again at
// once) and replaces m.Receipt with the new receipt; the old one no longer
// acks.
func (sc *SimpleConsumer) ChangeInvisibleDuration(ctx context.Context, m *ReceivedMessage, d time.Duration) error {
	h := remoting.ChangeInvisibleTimeRequestHeader{ConsumerGroup: sc.group, Topic: m.Topic, QueueID: m.QueueID, ExtraInfo: m.Receipt,
		Offset: m.QueueOffset, InvisibleTime: d.Milliseconds()}
	mk := func() *remoting.Command {
		return remoting.NewRequest(remoting.ChangeMessageInvisibleTime, h.Encode(), nil)
	}
	resp, addr, err := sc.c.invokeLeader(ctx, mk, false)
	if err != nil {
		sc.relearnLeader(ctx)
	} else {
		sc.answered(resp, addr)
	}
	if err == nil && resp.Code != remoting.Success {
		err = receiptError(addr, resp)
	}
	if err != nil {
		return fmt.Errorf("client: change invisible time of %s %s/%d@%d: %w", sc.group, m.Topic, m.QueueID, m.QueueOffset, err)
	}
	rh, err := remoting.DecodeChangeInvisibleTimeResponseHeader(resp.ExtFields)
	if err != nil {
		return fmt.Errorf("client: change invisible time: %w: %w", ErrProtocol, err)
	}
	e, err := m.receipt()
	if err != nil {
		return fmt.Errorf("client: change invisible time: %w: %w", ErrProtocol, err)
	}
	e.StartOffset, e.PopTime, e.InvisibleTime, e.ReviveQid = m.QueueOffset, rh.PopTime, rh.InvisibleTime, rh.ReviveQid
	m.Receipt = e.String()
	m.ck, m.ckOf = e, m.Receipt
	m.InvisibleUntil = time.UnixMilli(rh.PopTime + rh.InvisibleTime)
	return nil
}

// receiptError is the error of an ack or change answered other than
// SUCCESS: NO_MESSAGE about a receipt wraps ErrReceiptExpired too.
func receiptError(addr string, resp *remoting.Command) error {
	e := responseError(addr, resp)
	if resp.Code == remoting.NoMessage {
		return fmt.Errorf("%w: %w", ErrReceiptExpired, e)
	}
	return e
}
