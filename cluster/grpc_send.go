package cluster

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/protocol/grpc/rmqpb"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// systemPropertyNames are the property names a RocketMQ 5 client may not
// use as user properties: the broker gives them meaning.
var systemPropertyNames = map[string]bool{
	message.PropertyKeys: true, message.PropertyTags: true, message.PropertyWaitStoreMsgOK: true,
	message.PropertyDelayTimeLevel: true, message.PropertyRetryTopic: true, message.PropertyRealTopic: true,
	message.PropertyRealQueueID: true, message.PropertyTransactionPrepared: true, message.PropertyProducerGroup: true,
	message.PropertyMinOffset: true, message.PropertyMaxOffset: true, message.PropertyUniqKey: true,
	message.PropertyReconsumeTime: true, message.PropertyMaxReconsumeTimes: true,
	message.PropertyCheckImmunityTimeSeconds: true, message.PropertyTranPreparedQueueOffset: true,
	message.PropertyTransactionID: true, message.PropertyPopCK: true, message.PropertyFirstPopTime: true,
	message.PropertyShardingKey: true, message.PropertyTimerDeliverMS: true, message.PropertyTimerDelaySec: true,
	message.PropertyTimerDelayMS: true, message.PropertyTimerOutMS: true, message.PropertyDLQOriginTopic: true,
	message.PropertyDLQOriginMessageID: true, message.PropertyMessageType: true, propTraceContext: true,
}

// propTraceContext carries SystemProperties.trace_context.
const propTraceContext = "TRACE_CONTEXT"

// SendMessage stores each message through the remoting send path. Every
// message gets its own result entry; the top status is their common code,
// or MULTIPLE_RESULTS.
func (s *grpcService) SendMessage(ctx context.Context, req *rmqpb.SendMessageRequest) (*rmqpb.SendMessageResponse, error) {
	if len(req.Messages) == 0 {
		return &rmqpb.SendMessageResponse{Status: st(rmqpb.Code_BAD_REQUEST, "no message to send")}, nil
	}
	resp := &rmqpb.SendMessageResponse{Entries: make([]*rmqpb.SendResultEntry, 0, len(req.Messages))}
	for _, m := range req.Messages {
		resp.Entries = append(resp.Entries, s.sendOne(ctx, m))
	}
	resp.Status = resp.Entries[0].Status
	for _, e := range resp.Entries[1:] {
		if e.Status.Code != resp.Status.Code {
			resp.Status = st(rmqpb.Code_MULTIPLE_RESULTS, "entries differ")
			break
		}
	}
	return resp, nil
}

func (s *grpcService) sendOne(ctx context.Context, m *rmqpb.Message) *rmqpb.SendResultEntry {
	p, failed := s.planSend(ctx, m)
	if failed != nil {
		return failed
	}
	resp, inline := s.sendInline(ctx, p.req, p.h)
	if !inline {
		p.req.ExtFields = p.h.EncodeV2()
		resp = s.exec(ctx, p.ak, p.req)
	}
	return s.sendEntry(p, resp)
}

// grpcSend is a SendMessage message checked and turned into the remoting
// send it becomes: req (its body; the header is h, encoded into req only
// when it goes through handle) and what its result entry needs.
type grpcSend struct {
	req     *remoting.Command
	h       remoting.SendMessageRequestHeader
	ak      string
	topic   string
	sp      *rmqpb.SystemProperties
	dueMs   int64
	sysFlag int32
}

// planSend checks m and builds its send, or returns the entry that
// refuses it.
func (s *grpcService) planSend(ctx context.Context, m *rmqpb.Message) (*grpcSend, *rmqpb.SendResultEntry) {
	sp := m.GetSystemProperties()
	fail := func(code rmqpb.Code, format string, args ...any) (*grpcSend, *rmqpb.SendResultEntry) {
		return nil, &rmqpb.SendResultEntry{Status: st(code, format, args...), MessageId: sp.GetMessageId()}
	}
	topic := m.GetTopic().GetName()
	if err := message.CheckTopic(topic); err != nil {
		return fail(rmqpb.Code_ILLEGAL_TOPIC, "%v", err)
	}
	var ak string
	if s.b.policy() != nil { // else authorize lets it pass: no resource list to build
		var denied *rmqpb.Status
		ak, denied = s.authorize(ctx, "SendMessage", []acl.Resource{{Name: topic, Perm: acl.Pub}})
		if denied != nil {
			return nil, &rmqpb.SendResultEntry{Status: denied, MessageId: sp.GetMessageId()}
		}
	}
	switch {
	case sp == nil:
		return fail(rmqpb.Code_BAD_REQUEST, "message without system properties")
	case sp.MessageId == "":
		return fail(rmqpb.Code_ILLEGAL_MESSAGE_ID, "message id is empty")
	case len(m.Body) == 0:
		return fail(rmqpb.Code_MESSAGE_BODY_EMPTY, "message body is empty")
	case len(m.Body) > message.MaxBodySize:
		return fail(rmqpb.Code_MESSAGE_BODY_TOO_LARGE, "message body of %d bytes exceeds %d", len(m.Body), message.MaxBodySize)
	case sp.BodyEncoding == rmqpb.Encoding_GZIP:
		return fail(rmqpb.Code_UNSUPPORTED, "gzip body encoding is not supported; send the body as it is (IDENTITY)")
	}
	ps := make(grpcProps, 0, 8)
	ps = append(ps, grpcProp{message.PropertyUniqKey, sp.MessageId})
	for k, v := range m.UserProperties {
		if systemPropertyNames[k] {
			return fail(rmqpb.Code_ILLEGAL_MESSAGE_PROPERTY_KEY, "user property %q is a system property name", k)
		}
		ps = append(ps, grpcProp{k, v})
	}
	if sp.Tag != nil {
		if *sp.Tag == "" || strings.ContainsAny(*sp.Tag, "|") {
			return fail(rmqpb.Code_ILLEGAL_MESSAGE_TAG, "tag %q: must be non-empty and without '|'", *sp.Tag)
		}
		ps = append(ps, grpcProp{message.PropertyTags, *sp.Tag})
	}
	for _, k := range sp.Keys {
		if strings.TrimSpace(k) == "" || strings.Contains(k, " ") {
			return fail(rmqpb.Code_ILLEGAL_MESSAGE_KEY, "key %q: must be non-empty and without spaces", k)
		}
	}
	if len(sp.Keys) > 0 {
		ps = append(ps, grpcProp{message.PropertyKeys, strings.Join(sp.Keys, " ")})
	}
	if sp.TraceContext != nil && *sp.TraceContext != "" {
		ps = append(ps, grpcProp{propTraceContext, *sp.TraceContext})
	}
	group := sp.GetMessageGroup()
	due := sp.GetDeliveryTimestamp()
	var sysFlag int32
	switch sp.MessageType {
	case rmqpb.MessageType_NORMAL, rmqpb.MessageType_MESSAGE_TYPE_UNSPECIFIED:
		if group != "" || due != nil {
			return fail(rmqpb.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "a NORMAL message has neither a message group nor a delivery timestamp")
		}
	case rmqpb.MessageType_FIFO:
		if group == "" || due != nil {
			return fail(rmqpb.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "a FIFO message has a message group and no delivery timestamp")
		}
		ps = append(ps, grpcProp{message.PropertyShardingKey, group})
	case rmqpb.MessageType_DELAY:
		if due == nil || group != "" {
			return fail(rmqpb.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "a DELAY message has a delivery timestamp and no message group")
		}
		dueMs := due.AsTime().UnixMilli()
		if max := time.Now().Add(s.b.cfg.MaxTimerDelay).UnixMilli(); dueMs > max {
			return fail(rmqpb.Code_ILLEGAL_DELIVERY_TIME, "delivery timestamp %s is more than %v ahead", due.AsTime().UTC().Format(time.RFC3339), s.b.cfg.MaxTimerDelay)
		}
		ps = append(ps, grpcProp{message.PropertyTimerDeliverMS, strconv.FormatInt(max(dueMs, 1), 10)})
	case rmqpb.MessageType_TRANSACTION:
		if group != "" || due != nil {
			return fail(rmqpb.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "a TRANSACTION message has neither a message group nor a delivery timestamp")
		}
		// RocketMQ's proxy takes the topic for the producer group: the
		// check-back goes to a producer publishing the topic.
		ps = append(ps, grpcProp{message.PropertyTransactionPrepared, "true"})
		ps = append(ps, grpcProp{message.PropertyProducerGroup, topic})
		if d := sp.OrphanedTransactionRecoveryDuration; d != nil && d.AsDuration() >= time.Second {
			ps = append(ps, grpcProp{message.PropertyCheckImmunityTimeSeconds, strconv.FormatInt(int64(d.AsDuration()/time.Second), 10)})
		}
		sysFlag = message.SysFlagTransactionPrepared
	default:
		return fail(rmqpb.Code_UNSUPPORTED, "message type %s is not supported", sp.MessageType)
	}
	qid, create := s.queueFor(topic, group)
	if qid == -2 {
		return fail(rmqpb.Code_TOPIC_NOT_FOUND, "topic %s does not exist", topic)
	}
	var born int64
	if sp.BornTimestamp != nil {
		born = sp.BornTimestamp.AsTime().UnixMilli()
	} else {
		born = time.Now().UnixMilli()
	}
	h := remoting.SendMessageRequestHeader{ProducerGroup: topic, Topic: topic, DefaultTopic: AutoCreateTopicKey, DefaultTopicQueueNums: create,
		QueueID: qid, SysFlag: sysFlag, BornTimestamp: born, Properties: ps.encode()}
	// A leader stores it from h; handle (a follower's forward, a topic to
	// create) reads the request's ext fields.
	p := &grpcSend{req: remoting.NewRequest(remoting.SendMessageV2, nil, m.Body), h: h, ak: ak, topic: topic, sp: sp, sysFlag: sysFlag}
	if due != nil {
		p.dueMs = due.AsTime().UnixMilli()
	}
	return p, nil
}

// sendEntry is the result entry of p's send, answered resp.
func (s *grpcService) sendEntry(p *grpcSend, resp *remoting.Command) *rmqpb.SendResultEntry {
	r, failed := s.sendOK(p, resp)
	if failed != nil {
		return failed
	}
	return &rmqpb.SendResultEntry{Status: ok(), MessageId: r.messageID, TransactionId: r.txnID, Offset: r.offset, RecallHandle: r.recall}
}

// sendOK is the result of p's send, answered resp, when it was stored;
// else the entry that says why not.
func (s *grpcService) sendOK(p *grpcSend, resp *remoting.Command) (grpcSendOK, *rmqpb.SendResultEntry) {
	sp := p.sp
	if resp.Code != remoting.Success {
		return grpcSendOK{}, &rmqpb.SendResultEntry{Status: remotingStatus(resp), MessageId: sp.MessageId}
	}
	rh, err := sendResult(resp)
	if err != nil {
		return grpcSendOK{}, &rmqpb.SendResultEntry{Status: st(rmqpb.Code_INTERNAL_SERVER_ERROR, "stored, but its result does not decode: %v", err), MessageId: sp.MessageId}
	}
	r := grpcSendOK{messageID: sp.MessageId, offset: rh.QueueOffset}
	if p.sysFlag == message.SysFlagTransactionPrepared {
		r.txnID = grpcTxnID(rh.MsgID, rh.QueueOffset)
	}
	if sp.MessageType == rmqpb.MessageType_DELAY {
		r.recall = s.b.recallHandle(p.topic, sp.MessageId, p.dueMs, rh.MsgID)
	}
	return r, nil
}

// grpcSendOK is a stored message's result entry (its status OK). As a
// SendMessageResponse of that one entry it encodes itself (h2.Encoded),
// as proto.Marshal encodes the generated message (tested): the answer of
// a leader's inline sends, without the generic protobuf path.
type grpcSendOK struct {
	messageID, txnID, recall string
	offset                   int64
}

// statusOKProto is ok() encoded.
var statusOKProto = func() []byte {
	b, err := proto.Marshal(ok())
	if err != nil {
		panic(err)
	}
	return b
}()

func (r *grpcSendOK) AppendProto(b []byte) []byte {
	b = protowire.AppendTag(b, 1, protowire.BytesType) // status
	b = protowire.AppendBytes(b, statusOKProto)
	n := protowire.SizeTag(1) + protowire.SizeBytes(len(statusOKProto))
	if r.messageID != "" {
		n += protowire.SizeTag(2) + protowire.SizeBytes(len(r.messageID))
	}
	if r.txnID != "" {
		n += protowire.SizeTag(3) + protowire.SizeBytes(len(r.txnID))
	}
	if r.offset != 0 {
		n += protowire.SizeTag(4) + protowire.SizeVarint(uint64(r.offset))
	}
	if r.recall != "" {
		n += protowire.SizeTag(5) + protowire.SizeBytes(len(r.recall))
	}
	b = protowire.AppendTag(b, 2, protowire.BytesType) // entries[0]
	b = protowire.AppendVarint(b, uint64(n))
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendBytes(b, statusOKProto)
	if r.messageID != "" {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendString(b, r.messageID)
	}
	if r.txnID != "" {
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendString(b, r.txnID)
	}
	if r.offset != 0 {
		b = protowire.AppendTag(b, 4, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(r.offset))
	}
	if r.recall != "" {
		b = protowire.AppendTag(b, 5, protowire.BytesType)
		b = protowire.AppendString(b, r.recall)
	}
	return b
}

// queueFor picks the queue of a send: for a message group, its hash over
// the write queues (same group, same queue); else round robin. For a
// topic that does not exist it returns -1 and the queue count to create
// it with when topics are created on first send, or -2 when not.
func (s *grpcService) queueFor(topic, group string) (qid, create int32) {
	tc, found := s.b.rep.Store().Topic(topic)
	n := int32(4)
	if found {
		n = max(tc.WriteQueueNums, 1)
	} else if !s.b.cfg.AutoCreateTopics {
		return -2, 0
	}
	if group != "" {
		qid = int32(uint32(message.JavaHashCode(group)) % uint32(n))
	} else {
		qid = int32(s.rr.Add(1) % uint32(n))
	}
	if !found {
		return qid, n
	}
	return qid, 0
}

// grpcProps collects a gRPC send's properties, each name once, and
// encodes them as message.EncodeProperties does a map (names sorted),
// without building the map.
type grpcProps []grpcProp

type grpcProp struct{ k, v string }

func (ps grpcProps) encode() string {
	slices.SortFunc(ps, func(a, b grpcProp) int { return strings.Compare(a.k, b.k) })
	n := 0
	for _, e := range ps {
		n += len(e.k) + len(e.v) + 2
	}
	var out strings.Builder
	out.Grow(n)
	for _, e := range ps {
		out.WriteString(e.k)
		out.WriteByte(message.NameValueSeparator)
		out.WriteString(e.v)
		out.WriteByte(message.PropertySeparator)
	}
	return out.String()
}

// sendResult reads a send's answer: typed when this node stored it,
// ext fields when the leader did.
func sendResult(resp *remoting.Command) (remoting.SendMessageResponseHeader, error) {
	if h, isTyped := resp.Header.(*remoting.SendMessageResponseHeader); isTyped && resp.ExtFields == nil {
		return *h, nil
	}
	return remoting.DecodeSendMessageResponseHeader(resp.ExtFields)
}

// grpcTxnID is the transaction id a gRPC producer gets for a half message:
// its offsetMsgId (store host and commit log offset) and its queue offset,
// all END_TRANSACTION needs.
func grpcTxnID(offsetMsgID string, half int64) string {
	return offsetMsgID + "-" + strconv.FormatInt(half, 10)
}

func parseGRPCTxnID(id string) (phy, half int64, err error) {
	mid, hs, found := strings.Cut(id, "-")
	if !found {
		return 0, 0, fmt.Errorf("transaction id %q: want OFFSETMSGID-HALFOFFSET", id)
	}
	if _, phy, err = message.ParseOffsetMsgID(mid); err != nil {
		return 0, 0, fmt.Errorf("transaction id %q: %w", id, err)
	}
	if half, err = strconv.ParseInt(hs, 10, 64); err != nil || half < 0 {
		return 0, 0, fmt.Errorf("transaction id %q: bad half offset", id)
	}
	return phy, half, nil
}

// EndTransaction commits or rolls back a half message as END_TRANSACTION.
func (s *grpcService) EndTransaction(ctx context.Context, req *rmqpb.EndTransactionRequest) (*rmqpb.EndTransactionResponse, error) {
	topic := req.GetTopic().GetName()
	ak, denied := s.authorize(ctx, "EndTransaction", []acl.Resource{{Name: topic, Perm: acl.Pub}})
	if denied != nil {
		return &rmqpb.EndTransactionResponse{Status: denied}, nil
	}
	phy, half, err := parseGRPCTxnID(req.TransactionId)
	if err != nil {
		return &rmqpb.EndTransactionResponse{Status: st(rmqpb.Code_INVALID_TRANSACTION_ID, "%v", err)}, nil
	}
	h := remoting.EndTransactionRequestHeader{ProducerGroup: topic, TranStateTableOffset: half, CommitLogOffset: phy,
		FromTransactionCheck: req.Source == rmqpb.TransactionSource_SOURCE_SERVER_CHECK, MsgID: req.MessageId, TransactionID: req.TransactionId}
	switch req.Resolution {
	case rmqpb.TransactionResolution_COMMIT:
		h.CommitOrRollback = remoting.TransactionCommitType
	case rmqpb.TransactionResolution_ROLLBACK:
		h.CommitOrRollback = remoting.TransactionRollbackType
	default:
		return &rmqpb.EndTransactionResponse{Status: st(rmqpb.Code_BAD_REQUEST, "resolution %s: want COMMIT or ROLLBACK", req.Resolution)}, nil
	}
	resp := s.exec(ctx, ak, remoting.NewRequest(remoting.EndTransaction, h.Encode(), nil))
	return &rmqpb.EndTransactionResponse{Status: remotingStatus(resp)}, nil
}

// grpcMessage converts a stored message to what a RocketMQ 5 client
// decodes; the body digest is MD5, upper-case hex, as clients verify.
func grpcMessage(m *message.Message, topic string) *rmqpb.Message {
	sum := md5.Sum(m.Body)
	sp := &rmqpb.SystemProperties{
		MessageId:      grpcMessageID(m),
		BodyDigest:     &rmqpb.Digest{Type: rmqpb.DigestType_MD5, Checksum: strings.ToUpper(hex.EncodeToString(sum[:]))},
		BodyEncoding:   rmqpb.Encoding_IDENTITY,
		MessageType:    rmqpb.MessageType_NORMAL,
		BornTimestamp:  timestamppb.New(time.UnixMilli(m.BornTimestamp)),
		BornHost:       hostString(m.BornHost),
		StoreTimestamp: timestamppb.New(time.UnixMilli(m.StoreTimestamp)),
		StoreHost:      m.StoreHost.String(),
		QueueId:        m.QueueID,
		QueueOffset:    &m.QueueOffset,
	}
	if t, found := m.Properties[message.PropertyTags]; found {
		sp.Tag = &t
	}
	if k := m.Properties[message.PropertyKeys]; k != "" {
		sp.Keys = message.SplitKeys(k)
	}
	attempt := m.ReconsumeTimes + 1
	sp.DeliveryAttempt = &attempt
	switch {
	case m.Properties[message.PropertyTransactionPrepared] == "true" || m.SysFlag&message.SysFlagTransactionMask != 0:
		sp.MessageType = rmqpb.MessageType_TRANSACTION
	case m.Properties[message.PropertyTimerDeliverMS] != "":
		sp.MessageType = rmqpb.MessageType_DELAY
		if ms, err := strconv.ParseInt(m.Properties[message.PropertyTimerDeliverMS], 10, 64); err == nil {
			sp.DeliveryTimestamp = timestamppb.New(time.UnixMilli(ms))
		}
	case m.Properties[message.PropertyShardingKey] != "":
		sp.MessageType = rmqpb.MessageType_FIFO
		g := m.Properties[message.PropertyShardingKey]
		sp.MessageGroup = &g
	}
	if tc := m.Properties[propTraceContext]; tc != "" {
		sp.TraceContext = &tc
	}
	if s := m.Properties[message.PropertyCheckImmunityTimeSeconds]; s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			sp.OrphanedTransactionRecoveryDuration = durationpb.New(time.Duration(n) * time.Second)
		}
	}
	user := map[string]string{}
	for k, v := range m.Properties {
		if !systemPropertyNames[k] {
			user[k] = v
		}
	}
	return &rmqpb.Message{Topic: &rmqpb.Resource{Name: topic}, UserProperties: user, SystemProperties: sp, Body: m.Body}
}

// grpcMessageID is the message ID a RocketMQ 5 client sees: the UNIQ_KEY,
// or the offset message ID of a message without one.
func grpcMessageID(m *message.Message) string {
	if id := m.Properties[message.PropertyUniqKey]; id != "" {
		return id
	}
	return message.OffsetMsgID(m.StoreHost, m.PhysicalOffset)
}

func hostString(a netip.AddrPort) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}
