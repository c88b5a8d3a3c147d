package remoting

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Pop consumption (RocketMQ 5): request codes, response codes, headers and
// the POP_CK receipt string. All times are milliseconds.

// Pop request codes.
const (
	PopMessage                 int32 = 200050
	AckMessage                 int32 = 200051
	PeekMessage                int32 = 200052
	ChangeMessageInvisibleTime int32 = 200053
	Notification               int32 = 200054
	PollingInfo                int32 = 200055
	BatchAckMessage            int32 = 200151
)

// Pop response codes.
const (
	NoMessage      int32 = 208
	PollingFull    int32 = 209
	PollingTimeout int32 = 210
)

// Pop limits and constants, as RocketMQ's.
const (
	// PopMaxMessages is the most messages one pop may ask for.
	PopMaxMessages = 32
	// PopOrderReviveQueue is the revive queue id an orderly pop's receipts
	// carry.
	PopOrderReviveQueue = 999
	// PopInitMin and PopInitMax are initMode's values (ConsumeInitMode):
	// where a group with no position in a queue starts.
	PopInitMin int32 = 0
	PopInitMax int32 = 1
)

// PopMessageRequestHeader is the header of POP_MESSAGE (200050).
type PopMessageRequestHeader struct {
	ConsumerGroup string
	Topic         string
	QueueID       int32 // < 0: any readable queue
	MaxMsgNums    int32
	InvisibleTime int64
	PollTime      int64 // long-polling budget; <= 0: answer at once
	BornTime      int64
	InitMode      int32
	ExpType       string // TAG or SQL92; "" is TAG
	Exp           string // "" is *
	Order         bool
	AttemptID     string
}

// Encode returns the ext fields.
func (h *PopMessageRequestHeader) Encode() map[string]string {
	w := newExtMap(12)
	w.str(fieldConsumerGroup, h.ConsumerGroup)
	w.str(fieldTopic, h.Topic)
	w.i32(fieldQueueID, h.QueueID)
	w.i32("maxMsgNums", h.MaxMsgNums)
	w.i64("invisibleTime", h.InvisibleTime)
	w.i64("pollTime", h.PollTime)
	w.i64("bornTime", h.BornTime)
	w.i32("initMode", h.InitMode)
	w.optStr("expType", h.ExpType)
	w.optStr("exp", h.Exp)
	w.optBool("order", h.Order)
	w.optStr("attemptId", h.AttemptID)
	return w.m
}

// DecodePopMessageRequestHeader decodes a POP_MESSAGE header.
func DecodePopMessageRequestHeader(ext map[string]string) (PopMessageRequestHeader, error) {
	r := extReader{ext: ext}
	h := PopMessageRequestHeader{
		ConsumerGroup: r.str(fieldConsumerGroup, true),
		Topic:         r.str(fieldTopic, true),
		QueueID:       r.i32(fieldQueueID, true),
		MaxMsgNums:    r.i32("maxMsgNums", true),
		InvisibleTime: r.i64("invisibleTime", true),
		PollTime:      r.i64("pollTime", false),
		BornTime:      r.i64("bornTime", false),
		InitMode:      r.i32("initMode", false),
		ExpType:       r.str("expType", false),
		Exp:           r.str("exp", false),
		Order:         r.boolean("order", false),
		AttemptID:     r.str("attemptId", false),
	}
	return h, r.err
}

// PopMessageResponseHeader is the response header of POP_MESSAGE.
type PopMessageResponseHeader struct {
	PopTime       int64
	InvisibleTime int64
	ReviveQid     int32
	RestNum       int64
	// StartOffsetInfo: "flag queueId startOffset" entries joined by ";".
	StartOffsetInfo string
	// MsgOffsetInfo: "flag queueId off1,off2,..." entries joined by ";".
	MsgOffsetInfo string
	// OrderCountInfo: "flag qo{queueId}%{offset} count" entries joined by
	// ";" (orderly pops).
	OrderCountInfo string
}

// Encode returns the ext fields.
func (h *PopMessageResponseHeader) Encode() map[string]string {
	w := newExtMap(7)
	w.i64("popTime", h.PopTime)
	w.i64("invisibleTime", h.InvisibleTime)
	w.i32("reviveQid", h.ReviveQid)
	w.i64("restNum", h.RestNum)
	w.optStr("startOffsetInfo", h.StartOffsetInfo)
	w.optStr("msgOffsetInfo", h.MsgOffsetInfo)
	w.optStr("orderCountInfo", h.OrderCountInfo)
	return w.m
}

// DecodePopMessageResponseHeader decodes a POP_MESSAGE response header.
func DecodePopMessageResponseHeader(ext map[string]string) (PopMessageResponseHeader, error) {
	r := extReader{ext: ext}
	h := PopMessageResponseHeader{
		PopTime:         r.i64("popTime", true),
		InvisibleTime:   r.i64("invisibleTime", true),
		ReviveQid:       r.i32("reviveQid", true),
		RestNum:         r.i64("restNum", true),
		StartOffsetInfo: r.str("startOffsetInfo", false),
		MsgOffsetInfo:   r.str("msgOffsetInfo", false),
		OrderCountInfo:  r.str("orderCountInfo", false),
	}
	return h, r.err
}

// AckMessageRequestHeader is the header of ACK_MESSAGE (200051).
type AckMessageRequestHeader struct {
	ConsumerGroup string
	Topic         string
	QueueID       int32
	ExtraInfo     string // the POP_CK receipt
	Offset        int64
}

// FieldDeadLetter is raftmq's own ext field of an ACK_MESSAGE: "true"
// moves the message to the group's dead-letter topic instead of acking it,
// as DEAD_LETTER_MESSAGE (DeadLetterMessage) does. Older raftmq followers
// forwarded ForwardMessageToDeadLetterQueue this way, so a leader still
// reads it; nothing sends it now (a leader that ignored it would ack
// without the copy).
const FieldDeadLetter = "raftmqDeadLetter"

// FieldLeader is raftmq's own ext field of an answer a follower forwarded
// to the leader: the leader's client address, so that a client whose
// leader changed sends its next request there, not through the follower.
const FieldLeader = "raftmqLeader"

// Encode returns the ext fields.
func (h *AckMessageRequestHeader) Encode() map[string]string {
	w := newExtMap(5)
	w.str(fieldConsumerGroup, h.ConsumerGroup)
	w.str(fieldTopic, h.Topic)
	w.i32(fieldQueueID, h.QueueID)
	w.str("extraInfo", h.ExtraInfo)
	w.i64("offset", h.Offset)
	return w.m
}

// DecodeAckMessageRequestHeader decodes an ACK_MESSAGE header.
func DecodeAckMessageRequestHeader(ext map[string]string) (AckMessageRequestHeader, error) {
	r := extReader{ext: ext}
	h := AckMessageRequestHeader{
		ConsumerGroup: r.str(fieldConsumerGroup, true),
		Topic:         r.str(fieldTopic, true),
		QueueID:       r.i32(fieldQueueID, true),
		ExtraInfo:     r.str("extraInfo", true),
		Offset:        r.i64("offset", true),
	}
	return h, r.err
}

// ChangeInvisibleTimeRequestHeader is the header of
// CHANGE_MESSAGE_INVISIBLETIME (200053).
type ChangeInvisibleTimeRequestHeader struct {
	ConsumerGroup string
	Topic         string
	QueueID       int32
	ExtraInfo     string
	Offset        int64
	InvisibleTime int64
}

// Encode returns the ext fields.
func (h *ChangeInvisibleTimeRequestHeader) Encode() map[string]string {
	w := newExtMap(6)
	w.str(fieldConsumerGroup, h.ConsumerGroup)
	w.str(fieldTopic, h.Topic)
	w.i32(fieldQueueID, h.QueueID)
	w.str("extraInfo", h.ExtraInfo)
	w.i64("offset", h.Offset)
	w.i64("invisibleTime", h.InvisibleTime)
	return w.m
}

// DecodeChangeInvisibleTimeRequestHeader decodes a
// CHANGE_MESSAGE_INVISIBLETIME header.
func DecodeChangeInvisibleTimeRequestHeader(ext map[string]string) (ChangeInvisibleTimeRequestHeader, error) {
	r := extReader{ext: ext}
	h := ChangeInvisibleTimeRequestHeader{
		ConsumerGroup: r.str(fieldConsumerGroup, true),
		Topic:         r.str(fieldTopic, true),
		QueueID:       r.i32(fieldQueueID, true),
		ExtraInfo:     r.str("extraInfo", true),
		Offset:        r.i64("offset", true),
		InvisibleTime: r.i64("invisibleTime", true),
	}
	return h, r.err
}

// ChangeInvisibleTimeResponseHeader is the response header of
// CHANGE_MESSAGE_INVISIBLETIME: the new receipt's times.
type ChangeInvisibleTimeResponseHeader struct {
	PopTime       int64
	InvisibleTime int64
	ReviveQid     int32
}

// Encode returns the ext fields.
func (h *ChangeInvisibleTimeResponseHeader) Encode() map[string]string {
	w := newExtMap(3)
	w.i64("popTime", h.PopTime)
	w.i64("invisibleTime", h.InvisibleTime)
	w.i32("reviveQid", h.ReviveQid)
	return w.m
}

// DecodeChangeInvisibleTimeResponseHeader decodes the response header.
func DecodeChangeInvisibleTimeResponseHeader(ext map[string]string) (ChangeInvisibleTimeResponseHeader, error) {
	r := extReader{ext: ext}
	h := ChangeInvisibleTimeResponseHeader{
		PopTime:       r.i64("popTime", true),
		InvisibleTime: r.i64("invisibleTime", true),
		ReviveQid:     r.i32("reviveQid", true),
	}
	return h, r.err
}

// PeekMessageRequestHeader is the header of PEEK_MESSAGE (200052).
type PeekMessageRequestHeader struct {
	ConsumerGroup string
	Topic         string
	QueueID       int32
	MaxMsgNums    int32
}

// DecodePeekMessageRequestHeader decodes a PEEK_MESSAGE header.
func DecodePeekMessageRequestHeader(ext map[string]string) (PeekMessageRequestHeader, error) {
	r := extReader{ext: ext}
	h := PeekMessageRequestHeader{
		ConsumerGroup: r.str(fieldConsumerGroup, true),
		Topic:         r.str(fieldTopic, true),
		QueueID:       r.i32(fieldQueueID, true),
		MaxMsgNums:    r.i32("maxMsgNums", true),
	}
	return h, r.err
}

// NotificationRequestHeader is the header of NOTIFICATION (200054): a
// long-polling probe for messages to pop.
type NotificationRequestHeader struct {
	ConsumerGroup string
	Topic         string
	QueueID       int32
	PollTime      int64
	BornTime      int64
	Order         bool
	AttemptID     string
}

// DecodeNotificationRequestHeader decodes a NOTIFICATION header.
func DecodeNotificationRequestHeader(ext map[string]string) (NotificationRequestHeader, error) {
	r := extReader{ext: ext}
	h := NotificationRequestHeader{
		ConsumerGroup: r.str(fieldConsumerGroup, true),
		Topic:         r.str(fieldTopic, true),
		QueueID:       r.i32(fieldQueueID, true),
		PollTime:      r.i64("pollTime", true),
		BornTime:      r.i64("bornTime", false),
		Order:         r.boolean("order", false),
		AttemptID:     r.str("attemptId", false),
	}
	return h, r.err
}

// PollingInfoRequestHeader is the header of POLLING_INFO (200055).
type PollingInfoRequestHeader struct {
	ConsumerGroup string
	Topic         string
	QueueID       int32
}

// DecodePollingInfoRequestHeader decodes a POLLING_INFO header.
func DecodePollingInfoRequestHeader(ext map[string]string) (PollingInfoRequestHeader, error) {
	r := extReader{ext: ext}
	h := PollingInfoRequestHeader{
		ConsumerGroup: r.str(fieldConsumerGroup, true),
		Topic:         r.str(fieldTopic, true),
		QueueID:       r.i32(fieldQueueID, true),
	}
	return h, r.err
}

// BatchAck is one entry of a BATCH_ACK_MESSAGE body, with RocketMQ's short
// JSON keys. Bits is a little-endian bit set (Java's BitSet.toByteArray),
// base64 in JSON: bit i acks offset StartOffset+i.
type BatchAck struct {
	ConsumerGroup string `json:"c"`
	Topic         string `json:"t"`
	RetryFlag     string `json:"r"`
	StartOffset   int64  `json:"so"`
	QueueID       int32  `json:"q"`
	ReviveQueueID int32  `json:"rq"`
	PopTime       int64  `json:"pt"`
	InvisibleTime int64  `json:"it"`
	Bits          []byte `json:"b"`
}

// Offsets returns the acked offsets, ascending.
func (a *BatchAck) Offsets() []int64 {
	var out []int64
	for i, by := range a.Bits {
		for j := 0; j < 8; j++ {
			if by&(1<<j) != 0 {
				out = append(out, a.StartOffset+int64(i*8+j))
			}
		}
	}
	return out
}

// SetOffsets sets Bits from offsets at or above StartOffset.
func (a *BatchAck) SetOffsets(offs []int64) {
	a.Bits = nil
	for _, off := range offs {
		d := off - a.StartOffset
		if d < 0 {
			continue
		}
		for int64(len(a.Bits)) <= d/8 {
			a.Bits = append(a.Bits, 0)
		}
		a.Bits[d/8] |= 1 << (d % 8)
	}
}

// BatchAckBody is the body of BATCH_ACK_MESSAGE (200151).
type BatchAckBody struct {
	BrokerName string     `json:"brokerName"`
	Acks       []BatchAck `json:"acks"`
}

// DecodeBatchAckBody decodes a BATCH_ACK_MESSAGE body.
func DecodeBatchAckBody(b []byte) (BatchAckBody, error) {
	if body, ok := decodeBatchAckFast(b); ok {
		return body, nil
	}
	var body BatchAckBody
	if err := json.Unmarshal(b, &body); err != nil {
		return body, fmt.Errorf("remoting: batch ack body: %v: %w", err, ErrMalformed)
	}
	return body, nil
}

// ExtraInfo is a pop receipt: the POP_CK property's value and an ack's
// extraInfo, "startOffset popTime invisibleTime reviveQid topicFlag
// brokerName queueId queueOffset", separated by single spaces.
type ExtraInfo struct {
	StartOffset   int64
	PopTime       int64
	InvisibleTime int64
	ReviveQid     int32
	TopicFlag     int32 // 0: the topic itself; 1, 2: pop retry topics
	BrokerName    string
	QueueID       int32
	QueueOffset   int64 // -1 when absent (old clients send it in offset)
}

// String returns the receipt.
func (e ExtraInfo) String() string { return string(e.Append(make([]byte, 0, 64+len(e.BrokerName)))) }

// Append appends the receipt's String form to dst.
func (e ExtraInfo) Append(dst []byte) []byte {
	dst = strconv.AppendInt(dst, e.StartOffset, 10)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, e.PopTime, 10)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, e.InvisibleTime, 10)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, int64(e.ReviveQid), 10)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, int64(e.TopicFlag), 10)
	dst = append(dst, ' ')
	dst = append(dst, e.BrokerName...)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, int64(e.QueueID), 10)
	if e.QueueOffset >= 0 {
		dst = append(dst, ' ')
		dst = strconv.AppendInt(dst, e.QueueOffset, 10)
	}
	return dst
}

// ParseExtraInfo parses a receipt of 7 or 8 fields (a proxy's 9th, the
// commit log offset, is accepted and ignored).
func ParseExtraInfo(s string) (ExtraInfo, error) {
	// Split by hand into a fixed array: a receipt is parsed per message
	// received and acked, and strings.Split allocated each time.
	var f [9]string
	n := 0
	for rest := s; ; n++ {
		i := strings.IndexByte(rest, ' ')
		if n == len(f) {
			return ExtraInfo{}, fmt.Errorf("remoting: receipt %q: more than %d fields: %w", s, len(f), ErrMalformed)
		}
		if i < 0 {
			f[n] = rest
			n++
			break
		}
		f[n], rest = rest[:i], rest[i+1:]
	}
	if n < 7 {
		return ExtraInfo{}, fmt.Errorf("remoting: receipt %q: %d fields: %w", s, n, ErrMalformed)
	}
	e := ExtraInfo{BrokerName: f[5], QueueOffset: -1}
	field := func(i, bits int) (int64, error) {
		v, err := strconv.ParseInt(f[i], 10, bits)
		if err != nil {
			return 0, fmt.Errorf("remoting: receipt %q: field %d: %w", s, i, ErrMalformed)
		}
		return v, nil
	}
	var err error
	if e.StartOffset, err = field(0, 64); err != nil {
		return ExtraInfo{}, err
	}
	if e.PopTime, err = field(1, 64); err != nil {
		return ExtraInfo{}, err
	}
	if e.InvisibleTime, err = field(2, 64); err != nil {
		return ExtraInfo{}, err
	}
	for _, x := range [...]struct {
		dst *int32
		i   int
	}{{&e.ReviveQid, 3}, {&e.TopicFlag, 4}, {&e.QueueID, 6}} {
		v, err := field(x.i, 32)
		if err != nil {
			return ExtraInfo{}, err
		}
		*x.dst = int32(v)
	}
	if n >= 8 {
		if e.QueueOffset, err = field(7, 64); err != nil {
			return ExtraInfo{}, err
		}
	}
	return e, nil
}
