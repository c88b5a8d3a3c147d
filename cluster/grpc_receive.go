package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/protocol/grpc/rmqpb"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// The receive side of the gRPC service: ReceiveMessage, AckMessage and
// ChangeInvisibleDuration become RocketMQ's pop requests (POP_MESSAGE,
// ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME) and go through handle like a
// remoting pop consumer's, so they take the node's pop path: long polling,
// forwarding to the leader, the replicated pop state. A node whose build
// does not serve pop answers those requests REQUEST_CODE_NOT_SUPPORTED,
// and the RPCs fail UNIMPLEMENTED with that reason.
//
// The receipt handle a client gets is the message's POP_CK receipt as the
// node wrote it (start offset, pop time, invisible time, revive queue,
// topic flag, broker name, queue id, queue offset), which the client
// hands back unread.

// RocketMQ's pop request codes and their answers (RequestCode,
// ResponseCode), and the receive side's bounds (RocketMQ's proxy's).
const (
	codePopMessage      int32 = 200050
	codeAckMessage      int32 = 200051
	codeChangeInvisible int32 = 200053
	respNoMessage       int32 = 208
	respPollingFull     int32 = 209
	respPollingTimeout  int32 = 210

	popInitMax          = "1"              // ConsumeInitMode.MAX, as RocketMQ's proxy pops
	defaultInvisible    = 60 * time.Second // a receive without one, or with auto renew
	minReceiveInvisible = 10 * time.Second
	maxLongPoll         = 20 * time.Second
	receiveBatchMax     = 32
	// pollReserve: a long poll ends this long before the client's
	// deadline, so the answer arrives in time.
	pollReserve = time.Second
	// MaxGRPCInvisible is the longest invisible time a receive or a
	// change may ask for: 12 hours, as RocketMQ's proxy.
	MaxGRPCInvisible = 12 * time.Hour
)

// popUnsupported turns a node's refusal of a pop request code into the
// RPC's UNIMPLEMENTED error, naming the RPC and why; nil otherwise.
func popUnsupported(rpc string, resp *remoting.Command) error {
	if resp.Code != remoting.RequestCodeNotSupported {
		return nil
	}
	return status.Errorf(codes.Unimplemented, "%s is not served by raftmq: pop consumption is not served by this node's build (%s)", rpc, resp.Remark)
}

// ReceiveMessage pops up to batch_size messages of the group, long polling
// up to long_polling_timeout (at most 20 s, and ending a second before the
// client's deadline), and streams status, messages, delivery timestamp.
func (s *grpcService) ReceiveMessage(req *rmqpb.ReceiveMessageRequest, stream rmqpb.MessagingService_ReceiveMessageServer) error {
	ctx := stream.Context()
	// reply sends the status, msgs (each a ReceiveMessageResponse with
	// its message, or a grpcReceived on the lean transport) and the
	// delivery timestamp.
	reply := func(st *rmqpb.Status, msgs []any) error {
		if err := stream.Send(&rmqpb.ReceiveMessageResponse{Content: &rmqpb.ReceiveMessageResponse_Status{Status: st}}); err != nil {
			return err
		}
		for _, m := range msgs {
			if err := stream.SendMsg(m); err != nil {
				return err
			}
		}
		return stream.Send(&rmqpb.ReceiveMessageResponse{Content: &rmqpb.ReceiveMessageResponse_DeliveryTimestamp{DeliveryTimestamp: timestamppb.Now()}})
	}
	group, topic := req.GetGroup().GetName(), req.GetMessageQueue().GetTopic().GetName()
	ak, denied := s.authorize(ctx, "ReceiveMessage", []acl.Resource{{Group: true, Name: group, Perm: acl.Sub}, {Name: topic, Perm: acl.Sub}})
	if denied != nil {
		return reply(denied, nil)
	}
	switch {
	case group == "":
		return reply(st(rmqpb.Code_ILLEGAL_CONSUMER_GROUP, "no consumer group"), nil)
	case topic == "":
		return reply(st(rmqpb.Code_ILLEGAL_TOPIC, "no topic in the message queue"), nil)
	case req.BatchSize <= 0:
		return reply(st(rmqpb.Code_BAD_REQUEST, "batch_size %d: want 1 to %d", req.BatchSize, receiveBatchMax), nil)
	case len(req.GetAttemptId()) > 256:
		return reply(st(rmqpb.Code_BAD_REQUEST, "attempt_id longer than 256 bytes"), nil)
	}
	invisible := defaultInvisible
	if req.AutoRenew {
		invisible = s.renew.receiveInvisible()
	} else if req.InvisibleDuration != nil {
		invisible = req.InvisibleDuration.AsDuration()
		if invisible < minReceiveInvisible || invisible > MaxGRPCInvisible {
			return reply(st(rmqpb.Code_ILLEGAL_INVISIBLE_TIME, "invisible_duration %v: want %v to %v", invisible, minReceiveInvisible, MaxGRPCInvisible), nil)
		}
	}
	poll := maxLongPoll
	if req.LongPollingTimeout != nil {
		poll = min(max(req.LongPollingTimeout.AsDuration(), 0), maxLongPoll)
	}
	if dl, ok := ctx.Deadline(); ok {
		poll = min(poll, max(time.Until(dl)-pollReserve, 0))
	}
	expType, exp := "TAG", "*"
	if f := req.GetFilterExpression(); f != nil {
		if f.Type == rmqpb.FilterType_SQL {
			expType = "SQL92"
		}
		if f.Expression != "" {
			exp = f.Expression
		}
	}
	gc, found := s.b.rep.Store().SubscriptionGroup(group)
	if !found && s.b.rep.Node().IsLeader() {
		// As a remoting consumer's heartbeat does: a client's receive can
		// reach the leader before its settings, which went to every node,
		// reached the leader and created the group.
		if err := s.b.ensureGroup(ctx, group); err != nil {
			s.b.log.Warn("cluster: creating a consumer group's config failed", "group", group, "err", err)
		}
		gc, _ = s.b.rep.Store().SubscriptionGroup(group)
	}
	order := gc.ConsumeMessageOrderly
	ext := map[string]string{
		"consumerGroup": group, "topic": topic, "queueId": "-1",
		"maxMsgNums":    strconv.Itoa(int(min(req.BatchSize, receiveBatchMax))),
		"invisibleTime": strconv.FormatInt(invisible.Milliseconds(), 10),
		"pollTime":      strconv.FormatInt(poll.Milliseconds(), 10),
		"bornTime":      strconv.FormatInt(time.Now().UnixMilli(), 10),
		"initMode":      popInitMax, "expType": expType, "exp": exp,
		"order": strconv.FormatBool(order),
	}
	if req.AttemptId != nil && *req.AttemptId != "" {
		ext["attemptId"] = *req.AttemptId
	}
	resp := s.exec(ctx, ak, remoting.NewRequest(codePopMessage, ext, nil))
	if resp == nil {
		return ctx.Err() // the client went away while polling
	}
	if err := popUnsupported("ReceiveMessage", resp); err != nil {
		return err
	}
	switch resp.Code {
	case remoting.Success:
	case respPollingTimeout, respNoMessage:
		return reply(st(rmqpb.Code_MESSAGE_NOT_FOUND, "no new message"), nil)
	case respPollingFull:
		return reply(st(rmqpb.Code_TOO_MANY_REQUESTS, "%s", resp.Remark), nil)
	default:
		return reply(remotingStatus(resp), nil)
	}
	var got []message.Message
	var renews []renewItem
	for b := resp.Body; len(b) > 0; {
		m, n, err := message.Decode(b)
		if err != nil {
			return reply(st(rmqpb.Code_INTERNAL_SERVER_ERROR, "popped messages do not decode: %v", err), nil)
		}
		b = b[n:]
		ck := m.Properties[message.PropertyPopCK]
		if ck == "" {
			return reply(st(rmqpb.Code_INTERNAL_SERVER_ERROR, "popped message %s has no receipt", grpcMessageID(&m)), nil)
		}
		got = append(got, m)
		if req.AutoRenew {
			renews = append(renews, renewItem{msgID: grpcMessageID(&m), handle: ck})
		}
	}
	if len(got) == 0 {
		return reply(st(rmqpb.Code_MESSAGE_NOT_FOUND, "no new message"), nil)
	}
	if req.AutoRenew && !s.renew.add(mdValue(ctx, mdClientID), group, topic, renews, invisible) {
		s.b.log.Warn("cluster: grpc auto renew table full; received messages are not renewed", "group", group, "topic", topic, "max", renewMax)
	}
	// The lean transport takes messages that encode themselves.
	lean := s.b.cfg.GRPCTransport == GRPCTransportLean
	for i := 0; lean && i < len(got); i++ {
		lean = grpcReceivable(&got[i], topic)
	}
	msgs := make([]any, len(got))
	var scratch []byte
	for i := range got {
		ck := got[i].Properties[message.PropertyPopCK]
		if lean {
			msgs[i] = &grpcReceived{m: &got[i], topic: topic, receipt: ck, scratch: &scratch}
			continue
		}
		gm := grpcMessage(&got[i], topic)
		gm.SystemProperties.ReceiptHandle = &ck
		msgs[i] = &rmqpb.ReceiveMessageResponse{Content: &rmqpb.ReceiveMessageResponse_Message{Message: gm}}
	}
	return reply(ok(), msgs)
}

// receipt reads the queue id and offset a receipt handle names.
func receipt(handle string) (queue int32, offset int64, fields []string, err error) {
	f := strings.Split(handle, " ")
	if len(f) != 8 {
		return 0, 0, nil, fmt.Errorf("receipt handle %q: want 8 space-separated fields", handle)
	}
	q, err1 := strconv.ParseInt(f[6], 10, 32)
	off, err2 := strconv.ParseInt(f[7], 10, 64)
	if err1 != nil || err2 != nil || q < 0 || off < 0 {
		return 0, 0, nil, fmt.Errorf("receipt handle %q: bad queue id or offset", handle)
	}
	return int32(q), off, f, nil
}

// receiptStatus maps a pop answer about a receipt to its status: an
// expired or superseded receipt is INVALID_RECEIPT_HANDLE, which clients
// stop retrying on.
func receiptStatus(resp *remoting.Command) *rmqpb.Status {
	if resp.Code == respNoMessage {
		return st(rmqpb.Code_INVALID_RECEIPT_HANDLE, "%s", resp.Remark)
	}
	return remotingStatus(resp)
}

// AckMessage acks the request's entries in one BATCH_ACK_MESSAGE (one
// replicated step, as a remoting SimpleConsumer's AckBatch; a single
// entry as an ACK_MESSAGE). Each entry
// gets its own status: an entry whose receipt does not parse fails alone;
// when the batch is refused for an entry's sake (an expired or unknown
// receipt, an offset out of range), the entries are acked again one
// ACK_MESSAGE each, which is idempotent (an acked entry answers OK again),
// to tell which failed. The top status is the entries' common code, or
// MULTIPLE_RESULTS.
func (s *grpcService) AckMessage(ctx context.Context, req *rmqpb.AckMessageRequest) (*rmqpb.AckMessageResponse, error) {
	group, topic := req.GetGroup().GetName(), req.GetTopic().GetName()
	ak, denied := s.authorize(ctx, "AckMessage", []acl.Resource{{Group: true, Name: group, Perm: acl.Sub}, {Name: topic, Perm: acl.Sub}})
	if denied != nil {
		return &rmqpb.AckMessageResponse{Status: denied}, nil
	}
	if len(req.Entries) == 0 {
		return &rmqpb.AckMessageResponse{Status: st(rmqpb.Code_BAD_REQUEST, "no entry to ack")}, nil
	}
	out := &rmqpb.AckMessageResponse{Entries: make([]*rmqpb.AckMessageResultEntry, len(req.Entries))}
	var valid []int
	rs := make([]Receipt, len(req.Entries))
	handles := make([]string, len(req.Entries)) // the latest, when renewed here
	client := mdValue(ctx, mdClientID)
	for i, e := range req.Entries {
		out.Entries[i] = &rmqpb.AckMessageResultEntry{MessageId: e.MessageId, ReceiptHandle: e.ReceiptHandle}
		handles[i] = s.renew.take(client, group, topic, e.MessageId, e.ReceiptHandle)
		r, err := ParseReceipt(group, topic, handles[i], -1)
		if err != nil {
			out.Entries[i].Status = st(rmqpb.Code_INVALID_RECEIPT_HANDLE, "%v", err)
			continue
		}
		rs[i] = r
		valid = append(valid, i)
	}
	if len(valid) > 0 {
		if err := s.ackBatch(ctx, ak, group, topic, rs, handles, valid, out.Entries); err != nil {
			return nil, err
		}
	}
	out.Status = out.Entries[0].Status
	for _, e := range out.Entries[1:] {
		if e.Status.Code != out.Status.Code {
			out.Status = st(rmqpb.Code_MULTIPLE_RESULTS, "entries differ")
			break
		}
	}
	return out, nil
}

// ackBatch acks the receipts rs[i] for i in valid as one BATCH_ACK_MESSAGE
// (one receipt: an ACK_MESSAGE) and sets those entries' statuses, falling
// back to an ACK_MESSAGE per entry when the batch was refused for an
// entry's sake.
func (s *grpcService) ackBatch(ctx context.Context, ak, group, topic string, rs []Receipt, handles []string, valid []int, entries []*rmqpb.AckMessageResultEntry) error {
	each := func() error {
		for _, i := range valid {
			r := rs[i]
			resp := s.exec(ctx, ak, remoting.NewRequest(codeAckMessage, map[string]string{"consumerGroup": group, "topic": topic,
				"queueId": strconv.Itoa(int(r.QueueID)), "extraInfo": handles[i], "offset": strconv.FormatInt(r.Offset, 10)}, nil))
			if err := popUnsupported("AckMessage", resp); err != nil {
				return err
			}
			entries[i].Status = receiptStatus(resp)
		}
		return nil
	}
	if len(valid) == 1 {
		return each() // as cheap, and its refusal names the entry alone
	}
	// One BatchAck per queue and pop time (a bit set from the lowest
	// offset), in the order first seen.
	type key struct {
		q       int32
		popTime int64
	}
	at := map[key]int{}
	var acks []remoting.BatchAck
	var offs [][]int64
	for _, i := range valid {
		r := rs[i]
		k := key{r.QueueID, r.PopTime}
		j, found := at[k]
		if !found {
			j = len(acks)
			at[k] = j
			rq := int32(0)
			if r.Order {
				rq = remoting.PopOrderReviveQueue
			}
			acks = append(acks, remoting.BatchAck{ConsumerGroup: group, Topic: topic, RetryFlag: "0", StartOffset: r.Offset,
				QueueID: r.QueueID, ReviveQueueID: rq, PopTime: r.PopTime, InvisibleTime: r.Invisible})
			offs = append(offs, nil)
		}
		acks[j].StartOffset = min(acks[j].StartOffset, r.Offset)
		offs[j] = append(offs[j], r.Offset)
	}
	for j := range acks {
		acks[j].SetOffsets(offs[j])
	}
	body, err := json.Marshal(remoting.BatchAckBody{BrokerName: s.b.cfg.BrokerName, Acks: acks})
	if err != nil {
		return status.Errorf(codes.Internal, "encoding the batch ack: %v", err)
	}
	resp := s.exec(ctx, ak, remoting.NewRequest(remoting.BatchAckMessage, map[string]string{}, body))
	if err := popUnsupported("AckMessage", resp); err != nil {
		return err
	}
	switch resp.Code {
	case respNoMessage, remoting.InvalidParameter, remoting.MessageIllegal:
		return each() // an entry's refusal: find which
	}
	// SUCCESS, or a refusal of the whole batch (busy, no leader, no such
	// topic or group): every entry's status.
	for _, i := range valid {
		entries[i].Status = receiptStatus(resp)
	}
	return nil
}

// ChangeInvisibleDuration changes when a received message becomes visible
// again (0: at once) and returns the receipt handle that now holds it.
func (s *grpcService) ChangeInvisibleDuration(ctx context.Context, req *rmqpb.ChangeInvisibleDurationRequest) (*rmqpb.ChangeInvisibleDurationResponse, error) {
	group, topic := req.GetGroup().GetName(), req.GetTopic().GetName()
	ak, denied := s.authorize(ctx, "ChangeInvisibleDuration", []acl.Resource{{Group: true, Name: group, Perm: acl.Sub}})
	if denied != nil {
		return &rmqpb.ChangeInvisibleDurationResponse{Status: denied}, nil
	}
	d := req.GetInvisibleDuration().AsDuration()
	if req.InvisibleDuration == nil || d < 0 || d > MaxGRPCInvisible {
		return &rmqpb.ChangeInvisibleDurationResponse{Status: st(rmqpb.Code_ILLEGAL_INVISIBLE_TIME, "invisible_duration %v: want 0 to %v", d, MaxGRPCInvisible)}, nil
	}
	// The client takes the message over: its renewal here ends.
	handle := s.renew.take(mdValue(ctx, mdClientID), group, topic, req.MessageId, req.ReceiptHandle)
	nh, stat := s.changeInvisible(ctx, ak, group, topic, handle, d)
	if stat.Code == rmqpb.Code_NOT_IMPLEMENTED {
		return nil, unimplemented("ChangeInvisibleDuration", stat.Message)
	}
	return &rmqpb.ChangeInvisibleDurationResponse{Status: stat, ReceiptHandle: nh}, nil
}

// ForwardMessageToDeadLetterQueue moves the received message its receipt
// handle names to the group's dead-letter topic (%DLQ%group), as a push
// consumer asks once its listener failed max_delivery_attempts times. It
// is raftmq's DEAD_LETTER_MESSAGE (an ACK_MESSAGE's header under a code of
// its own, which a leader of an older build refuses as not supported, and
// the RPC fails UNIMPLEMENTED, rather than acking): the leader stores the
// copy and removes the message's pop record in one entry, so OK means
// both happened and an error means neither did.
func (s *grpcService) ForwardMessageToDeadLetterQueue(ctx context.Context, req *rmqpb.ForwardMessageToDeadLetterQueueRequest) (*rmqpb.ForwardMessageToDeadLetterQueueResponse, error) {
	group, topic := req.GetGroup().GetName(), req.GetTopic().GetName()
	ak, denied := s.authorize(ctx, "ForwardMessageToDeadLetterQueue", []acl.Resource{{Group: true, Name: group, Perm: acl.Sub}, {Name: topic, Perm: acl.Sub}})
	if denied != nil {
		return &rmqpb.ForwardMessageToDeadLetterQueueResponse{Status: denied}, nil
	}
	switch {
	case group == "":
		return &rmqpb.ForwardMessageToDeadLetterQueueResponse{Status: st(rmqpb.Code_ILLEGAL_CONSUMER_GROUP, "no consumer group")}, nil
	case topic == "":
		return &rmqpb.ForwardMessageToDeadLetterQueueResponse{Status: st(rmqpb.Code_ILLEGAL_TOPIC, "no topic")}, nil
	case req.LiteTopic != nil && *req.LiteTopic != "":
		return &rmqpb.ForwardMessageToDeadLetterQueueResponse{Status: st(rmqpb.Code_NOT_IMPLEMENTED, "lite topics are not served")}, nil
	}
	handle := s.renew.take(mdValue(ctx, mdClientID), group, topic, req.MessageId, req.ReceiptHandle)
	q, off, _, err := receipt(handle)
	if err != nil {
		return &rmqpb.ForwardMessageToDeadLetterQueueResponse{Status: st(rmqpb.Code_INVALID_RECEIPT_HANDLE, "%v", err)}, nil
	}
	resp := s.exec(ctx, ak, remoting.NewRequest(remoting.DeadLetterMessage, map[string]string{"consumerGroup": group, "topic": topic,
		"queueId": strconv.Itoa(int(q)), "extraInfo": handle, "offset": strconv.FormatInt(off, 10)}, nil))
	if err := popUnsupported("ForwardMessageToDeadLetterQueue", resp); err != nil {
		return nil, err
	}
	if resp.Code != remoting.Success {
		s.b.log.Warn("cluster: grpc dead-letter forward refused", "group", group, "topic", topic, "message_id", req.MessageId, "remark", resp.Remark)
	}
	return &rmqpb.ForwardMessageToDeadLetterQueueResponse{Status: receiptStatus(resp)}, nil
}
