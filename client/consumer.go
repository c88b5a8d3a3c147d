package client

import (
	"bytes"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"strconv"
	"time"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// Pull defaults.
const (
	// DefaultPullBatch is the message count a pull asks for when max <= 0
	// (the Go and Java clients' PullBatchSize).
	DefaultPullBatch = 32
	// maxInflated bounds a decompressed body, against zip bombs.
	maxInflated  = 64 << 20
	subscribeAll = "*"
)

// PullStatus is the outcome of a pull.
type PullStatus int

// Pull outcomes (response codes SUCCESS, PULL_NOT_FOUND, PULL_OFFSET_MOVED,
// PULL_RETRY_IMMEDIATELY).
const (
	// Found: Messages holds at least one message.
	Found PullStatus = iota
	// NoNewMessages: nothing at the offset yet (a long poll expired).
	NoNewMessages
	// OffsetMoved: the offset is outside the queue; continue from
	// NextBeginOffset. Only the leader answers it.
	OffsetMoved
	// RetryImmediately: nothing matched the filter in the range scanned,
	// or a follower is behind; pull again from NextBeginOffset.
	RetryImmediately
)

func (s PullStatus) String() string {
	switch s {
	case Found:
		return "FOUND"
	case NoNewMessages:
		return "NO_NEW_MSG"
	case OffsetMoved:
		return "OFFSET_MOVED"
	case RetryImmediately:
		return "RETRY_IMMEDIATELY"
	}
	return "PullStatus(" + strconv.Itoa(int(s)) + ")"
}

// PullResult is the answer to a pull. The offsets come from the response
// header for every status.
type PullResult struct {
	Status PullStatus
	// NextBeginOffset is the offset to pull next.
	NextBeginOffset int64
	// MinOffset and MaxOffset bound the queue on the answering node:
	// MaxOffset is the offset the next stored message will get.
	MinOffset, MaxOffset int64
	Messages             []*MessageExt
	// Addr is the node that answered.
	Addr string
}

// MessageExt is a stored message as a pull returns it.
type MessageExt struct {
	Topic       string
	QueueID     int32
	QueueOffset int64
	// CommitLogOffset is the record's physical offset in the group's log.
	CommitLogOffset int64
	// Body is the message body, inflated if it was stored zlib-compressed.
	// If SysFlag still has message.SysFlagCompressed, the body is as
	// stored (another compression type, or it did not inflate).
	Body []byte
	// RawProperties are the message's properties as stored (name \x01
	// value \x02 ...), checked when the message was decoded; Property and
	// Properties read them. Decoding them into a map only on demand keeps
	// consuming cheap.
	RawProperties string
	// MsgID is the UNIQ_KEY property, or OffsetMsgID when there is none.
	MsgID string
	// OffsetMsgID is the broker's id: store host and CommitLogOffset.
	OffsetMsgID    string
	Tags           string
	Keys           []string
	BornTimestamp  int64
	StoreTimestamp int64
	// ReconsumeTimes counts the message's earlier failed deliveries: the
	// stored RECONSUMETIMES field (which the broker increments on each
	// copy it writes to a retry topic), plus, in a push consumer, the
	// local retries since it was pulled. A push consumer sends a message
	// whose ReconsumeTimes has reached MaxReconsumeTimes to the
	// dead-letter queue (orderly) or lets the broker do so (concurrent).
	ReconsumeTimes int32
	StoreHost      string
	BornHost       string
	Flag           int32
	SysFlag        int32

	// pulledFrom is the node a push consumer pulled the message from,
	// where it sends it back (CONSUMER_SEND_MSG_BACK); "" if unknown.
	pulledFrom string
}

// Property returns the value of the message property name.
func (m *MessageExt) Property(name string) (string, bool) {
	return message.RawPropertyValue(m.RawProperties, name)
}

// Properties returns the message's properties as a new map (nil if it has
// none).
func (m *MessageExt) Properties() map[string]string {
	props, _ := message.DecodeProperties(m.RawProperties) // checked when decoded
	return props
}

// PullConsumer pulls messages of a consumer group and manages the group's
// committed offsets. It keeps no state of its own beyond the group name;
// a consumer-group client (rebalancing, offset persistence) builds on it.
// Its methods are safe for concurrent use.
type PullConsumer struct {
	c     *Client
	group string
}

// NewPullConsumer returns a pull consumer of group.
func (c *Client) NewPullConsumer(group string) *PullConsumer {
	return &PullConsumer{c: c, group: group}
}

// PullRequest describes one pull.
type PullRequest struct {
	// Addr is the node to pull from; "" means the leader, or any node
	// when the leader is unknown or unreachable. Followers serve data
	// committed and applied on them.
	Addr   string
	Topic  string
	Queue  int32
	Offset int64
	// Max is the most messages wanted; <= 0 means DefaultPullBatch.
	Max int
	// LongPoll > 0 lets the broker hold the request up to this long
	// until a message arrives. The request's timeout is LongPoll plus
	// RequestTimeout.
	LongPoll time.Duration
	// Expression is a tag filter ("TagA || TagB"), or an SQL92 one with
	// ExpressionType ExpressionSQL92; "" means all.
	Expression string
	// ExpressionType is the kind of Expression; "" means ExpressionTag.
	ExpressionType ExpressionType
	// CommitOffset > 0 asks the broker to store it as the group's
	// committed offset of the queue (sysFlag COMMIT_OFFSET), as push
	// consumers do on every pull; only the leader does.
	CommitOffset int64
}

// Pull pulls up to max messages of topic's queue from offset, from the
// leader (see PullRequest).
func (pc *PullConsumer) Pull(ctx context.Context, topic string, queue int32, offset int64, max int, longPoll time.Duration) (PullResult, error) {
	return pc.PullWith(ctx, PullRequest{Topic: topic, Queue: queue, Offset: offset, Max: max, LongPoll: longPoll})
}

// PullFrom is Pull from the node at addr.
func (pc *PullConsumer) PullFrom(ctx context.Context, addr, topic string, queue int32, offset int64, max int, longPoll time.Duration) (PullResult, error) {
	return pc.PullWith(ctx, PullRequest{Addr: addr, Topic: topic, Queue: queue, Offset: offset, Max: max, LongPoll: longPoll})
}

// PullWith performs the pull r describes. It decodes every record of the
// answer, checking its CRC and lengths; a record that fails, or that
// belongs to another topic or queue, fails the pull with an error wrapping
// ErrCorrupt. A pull is a read: when r.Addr is "" and the chosen node
// cannot be reached, another node is tried.
func (pc *PullConsumer) PullWith(ctx context.Context, r PullRequest) (PullResult, error) {
	if r.Max <= 0 {
		r.Max = DefaultPullBatch
	}
	if r.LongPoll < 0 {
		r.LongPoll = 0
	}
	expr := r.Expression
	if expr == "" {
		expr = subscribeAll
	}
	h := remoting.PullMessageRequestHeader{
		ConsumerGroup:        pc.group,
		Topic:                r.Topic,
		QueueID:              r.Queue,
		QueueOffset:          r.Offset,
		MaxMsgNums:           int32(min(r.Max, 1<<16)),
		SysFlag:              remoting.PullSysFlagSubscription,
		SuspendTimeoutMillis: r.LongPoll.Milliseconds(),
		Subscription:         expr,
		ExpressionType:       string(ExpressionTag),
	}
	if r.ExpressionType != "" {
		h.ExpressionType = string(r.ExpressionType)
	}
	if r.LongPoll > 0 {
		h.SysFlag |= remoting.PullSysFlagSuspend
	}
	if r.CommitOffset > 0 {
		h.SysFlag |= remoting.PullSysFlagCommitOffset
		h.CommitOffset = r.CommitOffset
	}
	mk := func() *remoting.Command { return remoting.NewRequest(remoting.PullMessage, h.Encode(), nil) }
	if r.Addr == "" {
		pc.c.findLeader(ctx, r.Topic)
	}
	resp, addr, err := pc.c.invokeRead(ctx, r.Addr, mk, pc.c.timeout+r.LongPoll)
	if err != nil {
		return PullResult{}, fmt.Errorf("client: pull %s/%d at %d: %w", r.Topic, r.Queue, r.Offset, err)
	}
	return decodePull(addr, r.Topic, r.Queue, resp)
}

// decodePull turns a pull response into a result.
func decodePull(addr, topic string, queue int32, resp *remoting.Command) (PullResult, error) {
	res := PullResult{Addr: addr}
	switch resp.Code {
	case remoting.Success:
		res.Status = Found
	case remoting.PullNotFound:
		res.Status = NoNewMessages
	case remoting.PullOffsetMoved:
		res.Status = OffsetMoved
	case remoting.PullRetryImmediately:
		res.Status = RetryImmediately
	default:
		return PullResult{}, fmt.Errorf("client: pull %s/%d: %w", topic, queue, responseError(addr, resp))
	}
	h, err := remoting.DecodePullMessageResponseHeader(resp.ExtFields)
	if err != nil {
		return PullResult{}, fmt.Errorf("client: pull %s/%d from %s: %w: %w", topic, queue, addr, ErrProtocol, err)
	}
	res.NextBeginOffset, res.MinOffset, res.MaxOffset = h.NextBeginOffset, h.MinOffset, h.MaxOffset
	if res.Status != Found {
		return res, nil
	}
	res.Messages, err = DecodeMessages(resp.Body, topic, queue)
	if err != nil {
		return PullResult{}, fmt.Errorf("client: pull %s/%d from %s: %w", topic, queue, addr, err)
	}
	if len(res.Messages) == 0 {
		return PullResult{}, fmt.Errorf("client: pull %s/%d from %s: FOUND without messages: %w", topic, queue, addr, ErrProtocol)
	}
	return res, nil
}

// DecodeMessages decodes a body of stored records back to back (a pull
// body), magic V1 or V2, verifying each record's body CRC and lengths. If
// topic is not "", every record must belong to topic and queue. Errors wrap
// ErrCorrupt (and message.ErrCorrupt when the record decoder found the
// fault). Bodies alias b.
func DecodeMessages(b []byte, topic string, queue int32) ([]*MessageExt, error) {
	// Records of one pull share their topic and, mostly, their hosts:
	// their strings are made once per pull, not per record.
	var d hostStrings
	count := message.CountRecords(b) // never fewer than the records decoded
	out := make([]*MessageExt, 0, count)
	slab := make([]MessageExt, count) // one allocation for the pull's messages
	for off := 0; off < len(b); {
		v, err := message.Parse(b[off:], true)
		if err != nil {
			return nil, fmt.Errorf("%w: record %d at byte %d: %w", ErrCorrupt, len(out), off, err)
		}
		if topic != "" && (string(v.Topic) != topic || v.QueueID != queue) {
			return nil, fmt.Errorf("%w: record %d at byte %d is of %s/%d, pulled %s/%d",
				ErrCorrupt, len(out), off, v.Topic, v.QueueID, topic, queue)
		}
		x := &slab[0]
		slab = slab[1:]
		if err := fillMessageExt(x, &v, topic, &d); err != nil {
			return nil, fmt.Errorf("%w: record %d at byte %d: %w", ErrCorrupt, len(out), off, err)
		}
		out = append(out, x)
		off += v.Size
	}
	return out, nil
}

// hostStrings remembers the last two addresses formatted.
type hostStrings struct {
	addr [2]netip.AddrPort
	str  [2]string
}

func (h *hostStrings) get(i int, a netip.AddrPort) string {
	if h.str[i] == "" || h.addr[i] != a {
		h.addr[i], h.str[i] = a, a.String()
	}
	return h.str[i]
}

// fillMessageExt converts a parsed record into x; topic, if not empty, is
// the record's topic (one string for the whole pull), and d caches host
// strings. It fails on malformed properties.
func fillMessageExt(x *MessageExt, v *message.View, topic string, d *hostStrings) error {
	if topic == "" {
		topic = string(v.Topic)
	}
	raw, _, err := message.CheckRawProperties(string(v.Properties))
	if err != nil {
		return err
	}
	*x = MessageExt{
		Topic:           topic,
		QueueID:         v.QueueID,
		QueueOffset:     v.QueueOffset,
		CommitLogOffset: v.PhysicalOffset,
		Body:            v.Body,
		RawProperties:   raw,
		OffsetMsgID:     message.OffsetMsgID(v.StoreHost, v.PhysicalOffset),
		BornTimestamp:   v.BornTimestamp,
		StoreTimestamp:  v.StoreTimestamp,
		ReconsumeTimes:  v.ReconsumeTimes,
		StoreHost:       d.get(0, v.StoreHost),
		BornHost:        d.get(1, v.BornHost),
		Flag:            v.Flag,
		SysFlag:         v.SysFlag,
	}
	x.Tags, _ = x.Property(message.PropertyTags)
	if keys, ok := x.Property(message.PropertyKeys); ok {
		x.Keys = message.SplitKeys(keys)
	}
	x.MsgID, _ = x.Property(message.PropertyUniqKey)
	if x.MsgID == "" {
		x.MsgID = x.OffsetMsgID
	}
	if x.SysFlag&message.SysFlagCompressed != 0 {
		if ct := x.SysFlag & message.SysFlagCompressionMask; ct == 0 || ct == message.SysFlagCompressionZLIB {
			if body, err := inflate(x.Body); err == nil {
				x.Body = body
				x.SysFlag &^= message.SysFlagCompressed | message.SysFlagCompressionMask
			}
		}
	}
	return nil
}

// inflate decompresses a zlib body, refusing more than maxInflated bytes.
func inflate(b []byte) ([]byte, error) {
	zr, err := zlib.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("client: inflate: %w", err)
	}
	defer zr.Close()
	out, err := io.ReadAll(io.LimitReader(zr, maxInflated+1))
	if err != nil {
		return nil, fmt.Errorf("client: inflate: %w", err)
	}
	if len(out) > maxInflated {
		return nil, fmt.Errorf("client: inflate: body exceeds %d bytes", maxInflated)
	}
	return out, nil
}

// CommitOffset stores offset (the next offset to consume) as the group's
// committed offset of the queue (UPDATE_CONSUMER_OFFSET, answered once
// replicated). raftmq only moves a committed offset forward: a commit below
// the stored offset leaves it unchanged (ResetOffset moves back). That
// makes a commit safe to retry after an indeterminate outcome, so it is: a
// late copy cannot rewind the group.
func (pc *PullConsumer) CommitOffset(ctx context.Context, topic string, queue int32, offset int64) error {
	return pc.updateOffset(ctx, "commit", remoting.UpdateConsumerOffsetRequestHeader{ConsumerGroup: pc.group, Topic: topic, QueueID: queue, CommitOffset: offset})
}

// ResetOffset sets the group's committed offset of the queue to offset,
// backwards too (UPDATE_CONSUMER_OFFSET with raftmq's reset field). Stop the
// group's consumers of the queue first: a running consumer's next commit
// moves the offset forward again. A reset is retried after indeterminate
// outcomes like a commit, so a late copy may land after a later commit;
// check with FetchOffset when that matters.
func (pc *PullConsumer) ResetOffset(ctx context.Context, topic string, queue int32, offset int64) error {
	return pc.updateOffset(ctx, "reset", remoting.UpdateConsumerOffsetRequestHeader{ConsumerGroup: pc.group, Topic: topic, QueueID: queue, CommitOffset: offset, Reset: true})
}

func (pc *PullConsumer) updateOffset(ctx context.Context, what string, h remoting.UpdateConsumerOffsetRequestHeader) error {
	mk := func() *remoting.Command { return remoting.NewRequest(remoting.UpdateConsumerOffset, h.Encode(), nil) }
	resp, addr, err := pc.c.invokeLeader(ctx, mk, true)
	if err == nil && resp.Code != remoting.Success {
		err = responseError(addr, resp)
	}
	if err != nil {
		return fmt.Errorf("client: %s offset %d of %s %s/%d: %w", what, h.CommitOffset, pc.group, h.Topic, h.QueueID, err)
	}
	return nil
}

// FetchOffset returns the group's committed offset of the queue
// (QUERY_CONSUMER_OFFSET, answered by the leader), or false if none is
// stored (QUERY_NOT_FOUND).
func (pc *PullConsumer) FetchOffset(ctx context.Context, topic string, queue int32) (int64, bool, error) {
	return pc.fetchOffset(ctx, topic, queue, true)
}

// fetchOffset is FetchOffset; without exact, a group with no stored offset
// in a queue that has lost nothing to retention gets 0, as RocketMQ's
// clients do (so a new group sees what was sent before it started).
func (pc *PullConsumer) fetchOffset(ctx context.Context, topic string, queue int32, exact bool) (int64, bool, error) {
	h := remoting.QueryConsumerOffsetRequestHeader{ConsumerGroup: pc.group, Topic: topic, QueueID: queue, ExactOnly: exact}
	mk := func() *remoting.Command { return remoting.NewRequest(remoting.QueryConsumerOffset, h.Encode(), nil) }
	resp, addr, err := pc.c.invokeLeader(ctx, mk, true)
	if err != nil {
		return 0, false, fmt.Errorf("client: fetch offset of %s %s/%d: %w", pc.group, topic, queue, err)
	}
	switch resp.Code {
	case remoting.Success:
	case remoting.QueryNotFound:
		return 0, false, nil
	default:
		return 0, false, fmt.Errorf("client: fetch offset of %s %s/%d: %w", pc.group, topic, queue, responseError(addr, resp))
	}
	rh, err := remoting.DecodeQueryConsumerOffsetResponseHeader(resp.ExtFields)
	if err != nil {
		return 0, false, fmt.Errorf("client: fetch offset of %s %s/%d from %s: %w: %w", pc.group, topic, queue, addr, ErrProtocol, err)
	}
	return rh.Offset, true, nil
}

// MaxOffset returns the offset the queue's next message will get
// (GET_MAX_OFFSET), as the leader sees it (another node's view if the
// leader cannot be reached).
func (c *Client) MaxOffset(ctx context.Context, topic string, queue int32) (int64, error) {
	h := remoting.GetMaxOffsetRequestHeader{Topic: topic, QueueID: queue}
	return c.queueOffset(ctx, "max", remoting.GetMaxOffset, h.Encode(), topic, queue)
}

// MinOffset returns the smallest offset still stored in the queue
// (GET_MIN_OFFSET).
func (c *Client) MinOffset(ctx context.Context, topic string, queue int32) (int64, error) {
	h := remoting.GetMinOffsetRequestHeader{Topic: topic, QueueID: queue}
	return c.queueOffset(ctx, "min", remoting.GetMinOffset, h.Encode(), topic, queue)
}

// SearchOffset returns the offset of the queue's first message stored at
// or after t, or the max offset if every message is older
// (SEARCH_OFFSET_BY_TIMESTAMP).
func (c *Client) SearchOffset(ctx context.Context, topic string, queue int32, t time.Time) (int64, error) {
	h := remoting.SearchOffsetRequestHeader{Topic: topic, QueueID: queue, Timestamp: t.UnixMilli()}
	return c.queueOffset(ctx, "search", remoting.SearchOffsetByTimestamp, h.Encode(), topic, queue)
}

func (c *Client) queueOffset(ctx context.Context, what string, code int32, ext map[string]string, topic string, queue int32) (int64, error) {
	mk := func() *remoting.Command { return remoting.NewRequest(code, maps.Clone(ext), nil) }
	c.findLeader(ctx, topic)
	resp, addr, err := c.invokeRead(ctx, "", mk, c.timeout)
	if err == nil && resp.Code != remoting.Success {
		err = responseError(addr, resp)
	}
	if err != nil {
		return 0, fmt.Errorf("client: %s offset of %s/%d: %w", what, topic, queue, err)
	}
	rh, err := remoting.DecodeOffsetResponseHeader(resp.ExtFields)
	if err != nil {
		return 0, fmt.Errorf("client: %s offset of %s/%d from %s: %w: %w", what, topic, queue, addr, ErrProtocol, err)
	}
	return rh.Offset, nil
}

// findLeader fetches topic's route if no leader is known, so that a read
// goes to the leader rather than to any node. Failures are left to the
// read itself.
func (c *Client) findLeader(ctx context.Context, topic string) {
	if c.leaderAddr() == "" {
		_, _ = c.route(ctx, topic, time.Now().Add(-routeTTL), true) // the read reports what matters
	}
}

// readAttempts bounds the nodes a read tries when the caller named none.
const readAttempts = 2

// invokeRead sends a read request, made afresh by mk, to addr, or if addr
// is "" to the leader (else any node), moving to another node when one
// cannot be reached or does not answer. A response of any code is
// returned. A failed read changed nothing, so its error does not wrap
// ErrIndeterminate.
func (c *Client) invokeRead(ctx context.Context, addr string, mk func() *remoting.Command, timeout time.Duration) (*remoting.Command, string, error) {
	if addr != "" {
		resp, _, err := c.invoke(ctx, addr, mk(), timeout)
		return resp, addr, err
	}
	var (
		lastErr error
		avoid   string
	)
	for range readAttempts {
		target := c.writeTarget(avoid)
		resp, _, err := c.invoke(ctx, target, mk(), timeout)
		if err == nil {
			return resp, target, nil
		}
		lastErr = err
		if errors.Is(err, ErrClosed) || ctx.Err() != nil {
			break
		}
		c.leaderFailed(target)
		avoid = target
	}
	return nil, "", lastErr
}
