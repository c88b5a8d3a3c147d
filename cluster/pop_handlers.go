package cluster

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/raftmq/raftmq/internal/failpoint"
	"github.com/raftmq/raftmq/protocol/remoting"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/store/pop"
)

// The remoting side of pop consumption (pop.go): POP_MESSAGE,
// ACK_MESSAGE, BATCH_ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME,
// PEEK_MESSAGE, NOTIFICATION and POLLING_INFO. A follower forwards every
// one of them to the leader, like writes; a pop's long polling waits on
// the node that received it, which forwards one attempt at a time, so a
// forward never outlives its timeout.

// popPollMax bounds a pop's long polling, as RocketMQ's proxy clamps it.
const popPollMax = 20 * time.Second

// popPollingMax bounds the pops suspended on a node for one group's
// queue (RocketMQ's popPollingSize): one more is answered POLLING_FULL.
const popPollingMax = 1024

// popPollRecheck is how often a suspended pop looks again even without a
// change in the store (a leader elsewhere revives records this node only
// learns of by applying, which also wakes it).
const popPollRecheck = 500 * time.Millisecond

// popResponse maps an error of the pop API to RocketMQ's code and remark.
func (b *Broker) popResponse(conn *remoting.ServerConn, req *remoting.Command, err error) *remoting.Command {
	switch {
	case errors.Is(err, ErrPopInvalid), errors.Is(err, pop.ErrBadOp):
		return b.refuse(conn, req, remoting.InvalidParameter, err.Error())
	case errors.Is(err, ErrPopNoGroup):
		return b.refuse(conn, req, remoting.SubscriptionGroupNotExist, err.Error())
	case errors.Is(err, ErrPopNoPermission):
		return b.refuse(conn, req, remoting.NoPermission, err.Error())
	case errors.Is(err, ErrPopFilter):
		return b.refuse(conn, req, remoting.SubscriptionParseFailed, err.Error())
	case errors.Is(err, ErrReceiptExpired):
		return remoting.NewResponse(req, remoting.NoMessage, "receipt handle is expired: the message was popped again or its invisible time changed; nothing was acked")
	case errors.Is(err, ErrReceiptUnknown):
		return remoting.NewResponse(req, remoting.NoMessage, fmt.Sprintf("%v: the offset was never popped by this group; nothing was acked", err))
	case errors.Is(err, pop.ErrMoved), errors.Is(err, pop.ErrBusy):
		return remoting.NewResponse(req, remoting.SystemBusy, err.Error())
	}
	return b.errorResponse(req, err)
}

func (b *Broker) handlePopCode(ctx context.Context, conn *remoting.ServerConn, req *remoting.Command) (*remoting.Command, bool) {
	switch req.Code {
	case remoting.PopMessage:
		return b.handlePop(ctx, conn, req), true
	case remoting.AckMessage:
		return b.leaderOnly(ctx, req, func(ctx context.Context) *remoting.Command { return b.handleAck(ctx, conn, req) }), true
	case remoting.DeadLetterMessage:
		return b.leaderOnly(ctx, req, func(ctx context.Context) *remoting.Command { return b.handleAck(ctx, conn, req) }), true
	case remoting.BatchAckMessage:
		return b.leaderOnly(ctx, req, func(ctx context.Context) *remoting.Command { return b.handleBatchAck(ctx, conn, req) }), true
	case remoting.ChangeMessageInvisibleTime:
		return b.leaderOnly(ctx, req, func(ctx context.Context) *remoting.Command { return b.handleChangeInvisible(ctx, conn, req) }), true
	case remoting.PeekMessage:
		return b.leaderOnly(ctx, req, func(ctx context.Context) *remoting.Command { return b.handlePeek(ctx, conn, req) }), true
	case remoting.Notification:
		return b.handleNotification(ctx, conn, req), true
	case remoting.PollingInfo:
		return b.handlePollingInfo(conn, req), true
	}
	return nil, false
}

// handlePop serves POP_MESSAGE: one attempt on the leader (or forwarded
// to it with no polling), again whenever the store changes until the
// poll time ends.
func (b *Broker) handlePop(ctx context.Context, conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	h, err := remoting.DecodePopMessageRequestHeader(req.ExtFields)
	if err != nil {
		return b.refuse(conn, req, remoting.InvalidParameter, err.Error())
	}
	if h.MaxMsgNums <= 0 || h.MaxMsgNums > remoting.PopMaxMessages {
		return b.refuse(conn, req, remoting.InvalidParameter, fmt.Sprintf("the max message num of pop is %d, not in [1, %d]", h.MaxMsgNums, remoting.PopMaxMessages))
	}
	if h.InvisibleTime <= 0 || h.InvisibleTime > MaxPopInvisible.Milliseconds() {
		return b.refuse(conn, req, remoting.InvalidParameter, fmt.Sprintf("invisibleTime %d ms is not in (0, %d]", h.InvisibleTime, MaxPopInvisible.Milliseconds()))
	}
	poll := min(time.Duration(h.PollTime)*time.Millisecond, popPollMax)
	deadline := time.Now().Add(poll)
	once := *req
	once.ExtFields = make(map[string]string, len(req.ExtFields))
	for k, v := range req.ExtFields {
		once.ExtFields[k] = v
	}
	once.ExtFields["pollTime"] = "0"
	st := b.rep.Store()
	key := pollKey(h.ConsumerGroup, h.Topic, h.QueueID)
	suspended := false
	defer func() {
		if suspended {
			b.pop.polling1(key, -1)
		}
	}()
	for {
		changed := st.TopicChanged(h.Topic)
		resp := b.leaderOnly(ctx, &once, func(ctx context.Context) *remoting.Command { return b.popOnce(ctx, conn, &once, &h) })
		if resp.Code != remoting.PollingTimeout || !time.Now().Before(deadline) {
			resp.Opaque = req.Opaque
			return resp
		}
		if !suspended {
			if b.pop.polling1(key, 1) > b.pop.pollMax {
				b.pop.polling1(key, -1)
				return remoting.NewResponse(req, remoting.PollingFull, fmt.Sprintf("the pops waiting on %s exceed %d; retry later", key, b.pop.pollMax))
			}
			suspended = true
		}
		if !b.popWait(ctx, changed, deadline) {
			return nil
		}
	}
}

// popWait waits, for a long-polling pop or notification, until changed
// closes (an applied entry touched the topic), the next periodic recheck
// (popPollRecheck) or the deadline; false: ctx ended.
func (b *Broker) popWait(ctx context.Context, changed <-chan struct{}, deadline time.Time) bool {
	t := time.NewTimer(min(time.Until(deadline), popPollRecheck))
	defer t.Stop()
	select {
	case <-changed:
		b.met.PopPollWakeups.WithLabelValues("entry").Inc()
	case <-t.C:
		b.met.PopPollWakeups.WithLabelValues("recheck").Inc()
	case <-ctx.Done():
		return false
	}
	return true
}

// popOnce is one pop attempt on the leader.
func (b *Broker) popOnce(ctx context.Context, conn *remoting.ServerConn, req *remoting.Command, h *remoting.PopMessageRequestHeader) *remoting.Command {
	tr := b.pop.traces.sample(false, time.Now())
	pctx, cancel := context.WithTimeout(withPopTrace(ctx, tr), b.cfg.SendTimeout)
	defer cancel()
	res, err := b.Pop(pctx, PopRequest{Group: h.ConsumerGroup, Topic: h.Topic, QueueID: h.QueueID, Max: int(h.MaxMsgNums),
		Invisible: time.Duration(h.InvisibleTime) * time.Millisecond, InitMode: h.InitMode, Order: h.Order,
		ExpressionType: h.ExpType, Expression: h.Exp, AttemptID: h.AttemptID})
	if err != nil {
		return b.popResponse(conn, req, err)
	}
	if len(res.Messages) == 0 {
		resp := remoting.NewResponse(req, remoting.PollingTimeout, "NO_NEW_MSG")
		rh := remoting.PopMessageResponseHeader{PopTime: time.Now().UnixMilli(), InvisibleTime: h.InvisibleTime, RestNum: res.Rest}
		resp.ExtFields = rh.Encode()
		return resp
	}
	resp := remoting.NewResponse(req, remoting.Success, "FOUND")
	rh := popResponseHeader(res, h.InvisibleTime)
	resp.ExtFields = rh.Encode()
	n := 0
	for _, m := range res.Messages {
		n += len(m.Record)
	}
	resp.Body = res.Body
	if len(resp.Body) != n {
		resp.Body = make([]byte, 0, n)
		for _, m := range res.Messages {
			resp.Body = append(resp.Body, m.Record...)
		}
	}
	b.pop.traces.answered(tr)
	return resp
}

// popResponseHeader builds POP_MESSAGE's header: the pop time and, by
// queue, the start offset and the messages' offsets (and an orderly pop's
// delivery counts), from which RocketMQ's clients rebuild each message's
// receipt.
func popResponseHeader(res *PopResult, invisible int64) remoting.PopMessageResponseHeader {
	rh := remoting.PopMessageResponseHeader{PopTime: res.PopTime, InvisibleTime: invisible, RestNum: res.Rest}
	var queues []int32
	var counts []byte
	for _, m := range res.Messages {
		if !slices.Contains(queues, m.QueueID) {
			queues = append(queues, m.QueueID)
		}
		if m.Receipt.Order {
			rh.ReviveQid = remoting.PopOrderReviveQueue
			if len(counts) > 0 {
				counts = append(counts, ';')
			}
			counts = append(counts, "0 qo"...)
			counts = strconv.AppendInt(counts, int64(m.QueueID), 10)
			counts = append(counts, '%')
			counts = strconv.AppendInt(counts, m.QueueOffset, 10)
			counts = append(counts, ' ')
			counts = strconv.AppendInt(counts, int64(m.Attempt-1), 10)
		}
	}
	slices.Sort(queues)
	starts := make([]byte, 0, 24*len(queues))
	offs := make([]byte, 0, 8*len(queues)+12*len(res.Messages))
	for i, q := range queues {
		if i > 0 {
			starts, offs = append(starts, ';'), append(offs, ';')
		}
		starts = append(starts, "0 "...)
		starts = strconv.AppendInt(starts, int64(q), 10)
		starts = append(starts, ' ')
		starts = strconv.AppendInt(starts, res.StartOffsets[q], 10)
		offs = append(offs, "0 "...)
		offs = strconv.AppendInt(offs, int64(q), 10)
		sep := byte(' ')
		for _, m := range res.Messages {
			if m.QueueID == q {
				offs = append(offs, sep)
				offs = strconv.AppendInt(offs, m.QueueOffset, 10)
				sep = ','
			}
		}
	}
	rh.StartOffsetInfo, rh.MsgOffsetInfo, rh.OrderCountInfo = string(starts), string(offs), string(counts)
	return rh
}

// ackCheck validates an ack's or a change's topic and queue, as RocketMQ's
// ack processor does, and returns the error response, or nil.
func (b *Broker) ackCheck(conn *remoting.ServerConn, req *remoting.Command, group, topic string, queueID int32, offset int64) *remoting.Command {
	st := b.rep.Store()
	tc, ok := st.Topic(topic)
	if !ok {
		return b.refuse(conn, req, remoting.TopicNotExist, fmt.Sprintf("topic[%s] not exist, apply first please!", topic))
	}
	if _, ok := st.SubscriptionGroup(group); !ok {
		return b.refuse(conn, req, remoting.SubscriptionGroupNotExist, fmt.Sprintf("subscription group [%s] does not exist", group))
	}
	if queueID < 0 || queueID >= tc.ReadQueueNums {
		return b.refuse(conn, req, remoting.MessageIllegal, fmt.Sprintf("queueId[%d] is illegal, topic:[%s] topicConfig.readQueueNums:[%d] consumer:[%s]",
			queueID, topic, tc.ReadQueueNums, group))
	}
	lo, hi := st.MinOffset(topic, queueID), st.MaxOffset(topic, queueID)
	if offset < lo || offset >= hi {
		return b.refuse(conn, req, remoting.NoMessage, fmt.Sprintf("offset is illegal, key:%s@%d, cqOffset:%d, minOffset:%d, maxOffset:%d",
			topic, queueID, offset, lo, hi))
	}
	return nil
}

// requestReceipt parses an ack's or change's receipt (extra) and checks it
// names the request's queue and offset and that the group may ack there;
// a refusal comes back as the response to send.
func (b *Broker) requestReceipt(conn *remoting.ServerConn, req *remoting.Command, group, topic, extra string, queueID int32, offset int64) (Receipt, *remoting.Command) {
	r, err := ParseReceipt(group, topic, extra, offset)
	if err != nil {
		return Receipt{}, b.popResponse(conn, req, err)
	}
	if r.QueueID != queueID || r.Offset != offset {
		return Receipt{}, b.refuse(conn, req, remoting.InvalidParameter, fmt.Sprintf("receipt names queue %d offset %d, the request queue %d offset %d", r.QueueID, r.Offset, queueID, offset))
	}
	if resp := b.ackCheck(conn, req, group, topic, queueID, offset); resp != nil {
		return Receipt{}, resp
	}
	return r, nil
}

func (b *Broker) handleAck(ctx context.Context, conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	h, err := remoting.DecodeAckMessageRequestHeader(req.ExtFields)
	if err != nil {
		return b.refuse(conn, req, remoting.InvalidParameter, err.Error())
	}
	r, resp := b.requestReceipt(conn, req, h.ConsumerGroup, h.Topic, h.ExtraInfo, h.QueueID, h.Offset)
	if resp != nil {
		return resp
	}
	actx, cancel := context.WithTimeout(ctx, b.cfg.SendTimeout)
	defer cancel()
	dl := req.ExtFields[remoting.FieldDeadLetter]
	if dl != "" && dl != "true" {
		return b.refuse(conn, req, remoting.InvalidParameter, fmt.Sprintf("%s=%q: want true or nothing", remoting.FieldDeadLetter, dl))
	}
	if req.Code == remoting.DeadLetterMessage || dl == "true" {
		if err := b.PopDeadLetter(actx, r); err != nil {
			return b.popResponse(conn, req, err)
		}
		return remoting.NewResponse(req, remoting.Success, "")
	}
	errs, err := b.PopAck(actx, []Receipt{r})
	if err == nil {
		err = errs[0]
	}
	if err != nil {
		return b.popResponse(conn, req, err)
	}
	return remoting.NewResponse(req, remoting.Success, "")
}

// handleBatchAck serves BATCH_ACK_MESSAGE: every ack of the body in one
// entry. It answers SUCCESS only if every one was carried out (or had
// been); otherwise the first failure's code, with the count in its remark.
// A leader past its term's read barrier takes it on the connection's
// reader instead (inlineBatchAck).
func (b *Broker) handleBatchAck(ctx context.Context, conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	rs, resp := b.batchAckReceipts(conn, req)
	if resp != nil {
		return resp
	}
	tr := b.pop.traces.sample(true, time.Now())
	actx, cancel := context.WithTimeout(withPopTrace(ctx, tr), b.cfg.SendTimeout)
	defer cancel()
	errs, err := b.PopAck(actx, rs)
	if err != nil {
		return b.popResponse(conn, req, err)
	}
	resp = b.batchAckResponse(conn, req, errs)
	if resp.Code == remoting.Success {
		b.pop.traces.answered(tr)
	}
	return resp
}

// batchAckReceipts decodes and checks a BATCH_ACK_MESSAGE's body and
// returns its receipts, or the refusal to answer.
func (b *Broker) batchAckReceipts(conn *remoting.ServerConn, req *remoting.Command) ([]Receipt, *remoting.Command) {
	if len(req.Body) == 0 {
		return nil, b.refuse(conn, req, remoting.NoMessage, "batch ack without a body")
	}
	body, err := remoting.DecodeBatchAckBody(req.Body)
	if err != nil {
		return nil, b.refuse(conn, req, remoting.InvalidParameter, err.Error())
	}
	n := 0
	for _, a := range body.Acks {
		for _, by := range a.Bits {
			n += bits.OnesCount8(by)
		}
	}
	rs := make([]Receipt, 0, n)
	for _, a := range body.Acks {
		if a.RetryFlag != "" && a.RetryFlag != "0" {
			return nil, b.refuse(conn, req, remoting.InvalidParameter, fmt.Sprintf("ack of a pop retry topic (flag %s): raftmq has none", a.RetryFlag))
		}
		offs := a.Offsets()
		if len(offs) > 0 {
			// The check of an entry's lowest and highest offsets covers
			// those between (the same topic, group and queue).
			lo, hi := slices.Min(offs), slices.Max(offs)
			if resp := b.ackCheck(conn, req, a.ConsumerGroup, a.Topic, a.QueueID, lo); resp != nil {
				return nil, resp
			}
			if resp := b.ackCheck(conn, req, a.ConsumerGroup, a.Topic, a.QueueID, hi); hi != lo && resp != nil {
				return nil, resp
			}
		}
		for _, off := range offs {
			rs = append(rs, Receipt{Group: a.ConsumerGroup, Topic: a.Topic, QueueID: a.QueueID, Offset: off, PopTime: a.PopTime, Invisible: a.InvisibleTime})
		}
	}
	if len(rs) == 0 {
		return nil, b.refuse(conn, req, remoting.NoMessage, "batch ack names no offset")
	}
	return rs, nil
}

// batchAckResponse answers a batch ack whose receipts had the outcomes
// errs: SUCCESS if each was acked, else the first failure's code with the
// count in its remark.
func (b *Broker) batchAckResponse(conn *remoting.ServerConn, req *remoting.Command, errs []error) *remoting.Command {
	failed := 0
	var first error
	for _, e := range errs {
		if e != nil {
			failed++
			if first == nil {
				first = e
			}
		}
	}
	if first != nil {
		resp := b.popResponse(conn, req, first)
		resp.Remark = fmt.Sprintf("%d of %d acks not carried out; first: %s", failed, len(errs), resp.Remark)
		return resp
	}
	return remoting.NewResponse(req, remoting.Success, "")
}

// inlineBatchAck takes a BATCH_ACK_MESSAGE on the connection's reader
// goroutine, as sends are (Broker.inline): it queues the ack's ops and
// answers from the completion of the last one, on the applier, so that
// no handler goroutine waits to be woken (a batch ack's "wake" stage,
// 0.3-1.2 ms of its slowest 5 % on a loaded machine). The ops, their
// entry and their outcomes are those of PopAck. It takes the request
// only on a leader whose term's read barrier is done (popBarrier) and
// with no failpoint on the ack; else it returns false and the handler
// serves it.
func (b *Broker) inlineBatchAck(conn *remoting.ServerConn, req *remoting.Command) bool {
	node := b.rep.Node()
	if !node.IsLeader() || b.pop.term.Load() != node.Status().Term {
		return false
	}
	if failpoint.On(b.fp, failpoint.AckInMemory) {
		return b.inlineAckInMemory()
	}
	rs, resp := b.batchAckReceipts(conn, req)
	if resp != nil {
		conn.Reply(req, resp)
		return true
	}
	b.pop.inlineAcks.Add(1)
	tr := b.pop.traces.sample(true, time.Now())
	ops, at := ackOps(rs, b.groupFormatLevel() >= store.FormatLevelAcks)
	out := make([]pop.Result, len(ops))
	var (
		left     atomic.Int32
		firstErr atomic.Pointer[error]
	)
	left.Store(int32(len(ops)))
	calls := make([]*popCall, len(ops))
	for i := range ops {
		c := &popCall{op: ops[i], done: make(chan popDone, 1), trace: tr}
		c.landed = func(d popDone) {
			if d.err != nil {
				firstErr.CompareAndSwap(nil, &d.err)
			}
			out[i] = d.res
			if left.Add(-1) != 0 {
				return
			}
			if tr != nil {
				tr.stamp(popWoken, time.Now())
			}
			if p := firstErr.Load(); p != nil {
				conn.Reply(req, b.popResponse(conn, req, *p))
				return
			}
			errs, acked := ackOutcomes(len(rs), ops, at, out)
			b.met.PopAcked.Add(float64(acked))
			resp := b.batchAckResponse(conn, req, errs)
			if resp.Code == remoting.Success {
				b.pop.traces.answered(tr)
			}
			conn.Reply(req, resp)
		}
		calls[i] = c
	}
	if tr != nil {
		tr.stamp(popBuilt, time.Now())
	}
	// A call not queued is finished with the error, which answers.
	_ = b.queuePopCalls(context.Background(), calls)
	return true
}

func (b *Broker) handleChangeInvisible(ctx context.Context, conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	h, err := remoting.DecodeChangeInvisibleTimeRequestHeader(req.ExtFields)
	if err != nil {
		return b.refuse(conn, req, remoting.InvalidParameter, err.Error())
	}
	r, resp := b.requestReceipt(conn, req, h.ConsumerGroup, h.Topic, h.ExtraInfo, h.QueueID, h.Offset)
	if resp != nil {
		return resp
	}
	cctx, cancel := context.WithTimeout(ctx, b.cfg.SendTimeout)
	defer cancel()
	nr, err := b.PopChangeInvisible(cctx, r, time.Duration(h.InvisibleTime)*time.Millisecond)
	if err != nil {
		return b.popResponse(conn, req, err)
	}
	resp = remoting.NewResponse(req, remoting.Success, "")
	rh := remoting.ChangeInvisibleTimeResponseHeader{PopTime: nr.PopTime, InvisibleTime: nr.Invisible}
	if nr.Order {
		rh.ReviveQid = remoting.PopOrderReviveQueue
	}
	resp.ExtFields = rh.Encode()
	return resp
}

func (b *Broker) handlePeek(ctx context.Context, conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	h, err := remoting.DecodePeekMessageRequestHeader(req.ExtFields)
	if err != nil {
		return b.refuse(conn, req, remoting.InvalidParameter, err.Error())
	}
	recs, err := b.PopPeek(ctx, h.ConsumerGroup, h.Topic, h.QueueID, int(h.MaxMsgNums))
	if err != nil {
		return b.popResponse(conn, req, err)
	}
	if len(recs) == 0 {
		return remoting.NewResponse(req, remoting.PollingTimeout, "NO_NEW_MSG")
	}
	resp := remoting.NewResponse(req, remoting.Success, "FOUND")
	rh := remoting.PopMessageResponseHeader{PopTime: time.Now().UnixMilli()}
	resp.ExtFields = rh.Encode()
	for _, r := range recs {
		resp.Body = append(resp.Body, r...)
	}
	return resp
}

// handleNotification serves NOTIFICATION: whether a pop would find a
// message, waiting up to the poll time for one. It reads this node's
// state after a read barrier, so a follower answers too.
func (b *Broker) handleNotification(ctx context.Context, conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	h, err := remoting.DecodeNotificationRequestHeader(req.ExtFields)
	if err != nil {
		return b.refuse(conn, req, remoting.InvalidParameter, err.Error())
	}
	if _, _, err := b.popCheck(h.ConsumerGroup, h.Topic, h.QueueID); err != nil {
		return b.popResponse(conn, req, err)
	}
	if resp := b.barrierOrRefuse(ctx, req, "notification"); resp != nil {
		return resp
	}
	deadline := time.Now().Add(min(time.Duration(h.PollTime)*time.Millisecond, popPollMax))
	st := b.rep.Store()
	for {
		changed := st.TopicChanged(h.Topic)
		has := b.popAvailable(h.ConsumerGroup, h.Topic, h.QueueID)
		if has || !time.Now().Before(deadline) {
			resp := remoting.NewResponse(req, remoting.Success, "")
			resp.ExtFields = map[string]string{"hasMsg": strconv.FormatBool(has), "pollingFull": "false"}
			return resp
		}
		if !b.popWait(ctx, changed, deadline) {
			return nil
		}
	}
}

// handlePollingInfo serves POLLING_INFO: the pops suspended on this node
// for a group's queue.
func (b *Broker) handlePollingInfo(conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	h, err := remoting.DecodePollingInfoRequestHeader(req.ExtFields)
	if err != nil {
		return b.refuse(conn, req, remoting.InvalidParameter, err.Error())
	}
	if _, _, err := b.popCheck(h.ConsumerGroup, h.Topic, h.QueueID); err != nil {
		return b.popResponse(conn, req, err)
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.ExtFields = map[string]string{"pollingNum": strconv.Itoa(b.pop.polling1(pollKey(h.ConsumerGroup, h.Topic, h.QueueID), 0))}
	return resp
}
