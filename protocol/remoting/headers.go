package remoting

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// Typed headers. A command's custom header travels as ext fields: each
// field of RocketMQ's Java header class under its field name, numbers in
// decimal, booleans "true"/"false" (RocketMQ's makeCustomHeaderToNet).
//
// Encode writes every field the Java class marks @CFNotNull and the
// optional ones only when they are not zero, as Java omits null fields.
// DecodeX returns an error wrapping ErrMalformed, naming the field, when a
// @CFNotNull field is missing or a number does not parse; an absent
// optional field decodes as zero. Booleans parse as Java's
// Boolean.parseBoolean does: "true" in any case is true, anything else
// false. Unknown ext fields (bname but in sends, lo, ns, ACL fields, ...) are ignored.

// Ext field names shared by several headers.
const (
	fieldTopic         = "topic"
	fieldQueueID       = "queueId"
	fieldConsumerGroup = "consumerGroup"
	fieldOffset        = "offset"
)

// extReader reads typed fields from ext fields and keeps the first error.
type extReader struct {
	ext map[string]string
	// alt, if set, returns a field's other name (a send header's V2 letter
	// for its V1 name); altFirst says to look under it first.
	alt      func(string) string
	altFirst bool
	err      error
}

func (r *extReader) get(name string) (string, bool) {
	if r.alt == nil {
		v, ok := r.ext[name]
		return v, ok
	}
	first, second := name, r.alt(name)
	if r.altFirst {
		first, second = second, first
	}
	if v, ok := r.ext[first]; ok {
		return v, true
	}
	v, ok := r.ext[second]
	return v, ok
}

func (r *extReader) fail(name, format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("remoting: header field %q: %s: %w", name, fmt.Sprintf(format, args...), ErrMalformed)
	}
}

// str returns field name; a missing required field is an error.
func (r *extReader) str(name string, required bool) string {
	v, ok := r.get(name)
	if !ok && required {
		r.fail(name, "missing")
	}
	return v
}

func (r *extReader) integer(name string, required bool, bits int) int64 {
	v, ok := r.get(name)
	if !ok {
		if required {
			r.fail(name, "missing")
		}
		return 0
	}
	n, err := strconv.ParseInt(v, 10, bits)
	if err != nil {
		r.fail(name, "%q is not an int%d", v, bits)
		return 0
	}
	return n
}

func (r *extReader) i32(name string, required bool) int32 {
	return int32(r.integer(name, required, 32))
}
func (r *extReader) i64(name string, required bool) int64 { return r.integer(name, required, 64) }

// boolean returns field name as Java's Boolean.parseBoolean would; a
// missing required field is an error.
func (r *extReader) boolean(name string, required bool) bool {
	v, ok := r.get(name)
	if !ok && required {
		r.fail(name, "missing")
	}
	return strings.EqualFold(v, "true")
}

// extWriter builds ext fields: into a map (m set), or as the entries of a
// ROCKETMQ binary header appended to bin (2-byte key length, key, 4-byte
// value length, value), which is how appendBinaryHeader writes every
// field, from a map or from a typed Header.
type extWriter struct {
	m   map[string]string
	bin []byte
}

func newExtMap(n int) extWriter { return extWriter{m: make(map[string]string, n)} }

func (w *extWriter) key(name string, vlen int) {
	w.bin = binary.BigEndian.AppendUint16(w.bin, uint16(len(name)))
	w.bin = append(w.bin, name...)
	w.bin = binary.BigEndian.AppendUint32(w.bin, uint32(vlen))
}

func (w *extWriter) str(name, v string) {
	if w.m != nil {
		w.m[name] = v
		return
	}
	w.key(name, len(v))
	w.bin = append(w.bin, v...)
}

func (w *extWriter) i64(name string, v int64) {
	if w.m != nil {
		w.m[name] = strconv.FormatInt(v, 10)
		return
	}
	w.key(name, 0)
	at := len(w.bin)
	w.bin = strconv.AppendInt(w.bin, v, 10)
	binary.BigEndian.PutUint32(w.bin[at-binValueLenSize:], uint32(len(w.bin)-at))
}

func (w *extWriter) i32(name string, v int32) { w.i64(name, int64(v)) }

func (w *extWriter) boolean(name string, v bool) { w.str(name, strconv.FormatBool(v)) }

func (w *extWriter) optStr(name, v string) {
	if v != "" {
		w.str(name, v)
	}
}

func (w *extWriter) optI32(name string, v int32) {
	if v != 0 {
		w.i32(name, v)
	}
}

func (w *extWriter) optI64(name string, v int64) {
	if v != 0 {
		w.i64(name, v)
	}
}

func (w *extWriter) optBool(name string, v bool) {
	if v {
		w.boolean(name, v)
	}
}

// SendMessageRequestHeader is the header of SEND_MESSAGE (10, long field
// names), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320) (short names
// "a".."m"). Required: ProducerGroup, Topic, DefaultTopic,
// DefaultTopicQueueNums, QueueID, SysFlag, BornTimestamp, Flag.
type SendMessageRequestHeader struct {
	ProducerGroup         string // producerGroup / a
	Topic                 string // topic / b
	DefaultTopic          string // defaultTopic / c: auto-create template, "TBW102"
	DefaultTopicQueueNums int32  // defaultTopicQueueNums / d
	QueueID               int32  // queueId / e: < 0 lets the broker choose
	SysFlag               int32  // sysFlag / f: message.SysFlag* bits
	BornTimestamp         int64  // bornTimestamp / g: producer clock, ms
	Flag                  int32  // flag / h: user flag
	Properties            string // properties / i: message.EncodeProperties form
	ReconsumeTimes        int32  // reconsumeTimes / j
	UnitMode              bool   // unitMode / k
	// MaxReconsumeTimes (maxReconsumeTimes / l) matters for %RETRY% topics.
	// 0 means "not sent": the broker should use the group's limit. A Java
	// broker reads a sent 0 as "no retries", so Encode omits it.
	MaxReconsumeTimes int32
	Batch             bool // batch / m: true for SEND_BATCH_MESSAGE
	// BrokerName (bname / n) is the broker name the client chose the queue
	// of, as RocketMQ's clients send it; "" if not sent.
	BrokerName string
}

// Send header field names, V1 (long) and V2 (short).
const (
	sendProducerGroup         = "producerGroup"
	sendTopic                 = "topic"
	sendDefaultTopic          = "defaultTopic"
	sendDefaultTopicQueueNums = "defaultTopicQueueNums"
	sendQueueID               = "queueId"
	sendSysFlag               = "sysFlag"
	sendBornTimestamp         = "bornTimestamp"
	sendFlag                  = "flag"
	sendProperties            = "properties"
	sendReconsumeTimes        = "reconsumeTimes"
	sendUnitMode              = "unitMode"
	sendMaxReconsumeTimes     = "maxReconsumeTimes"
	sendBatch                 = "batch"
	sendBrokerName            = "bname"
)

// sendV2Name returns the V2 (SendMessageRequestHeaderV2) name of a V1 send
// header field.
func sendV2Name(v1 string) string {
	switch v1 {
	case sendProducerGroup:
		return "a"
	case sendTopic:
		return "b"
	case sendDefaultTopic:
		return "c"
	case sendDefaultTopicQueueNums:
		return "d"
	case sendQueueID:
		return "e"
	case sendSysFlag:
		return "f"
	case sendBornTimestamp:
		return "g"
	case sendFlag:
		return "h"
	case sendProperties:
		return "i"
	case sendReconsumeTimes:
		return "j"
	case sendUnitMode:
		return "k"
	case sendMaxReconsumeTimes:
		return "l"
	case sendBatch:
		return "m"
	case sendBrokerName:
		return "n"
	}
	return v1
}

func identity(name string) string { return name }

// Encode returns the V1 ext fields (long names), for SEND_MESSAGE.
func (h *SendMessageRequestHeader) Encode() map[string]string { return h.encode(identity) }

// EncodeV2 returns the V2 ext fields (letters "a".."m"), for
// SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE.
func (h *SendMessageRequestHeader) EncodeV2() map[string]string { return h.encode(sendV2Name) }

// V2 returns h as the header of a SEND_MESSAGE_V2 or SEND_BATCH_MESSAGE
// request for Command.Header: encoded with the short names straight into
// the frame, without a map. h must not change until the request is sent.
func (h *SendMessageRequestHeader) V2() HeaderEncoder { return sendV2Header{h} }

type sendV2Header struct{ h *SendMessageRequestHeader }

func (s sendV2Header) encodeExt(w *extWriter) { s.h.encodeTo(w, sendV2Name) }

func (h *SendMessageRequestHeader) encode(name func(string) string) map[string]string {
	w := newExtMap(14)
	h.encodeTo(&w, name)
	return w.m
}

func (h *SendMessageRequestHeader) encodeTo(w *extWriter, name func(string) string) {
	w.str(name(sendProducerGroup), h.ProducerGroup)
	w.str(name(sendTopic), h.Topic)
	w.str(name(sendDefaultTopic), h.DefaultTopic)
	w.i32(name(sendDefaultTopicQueueNums), h.DefaultTopicQueueNums)
	w.i32(name(sendQueueID), h.QueueID)
	w.i32(name(sendSysFlag), h.SysFlag)
	w.i64(name(sendBornTimestamp), h.BornTimestamp)
	w.i32(name(sendFlag), h.Flag)
	w.optStr(name(sendProperties), h.Properties)
	w.optI32(name(sendReconsumeTimes), h.ReconsumeTimes)
	w.optBool(name(sendUnitMode), h.UnitMode)
	w.optI32(name(sendMaxReconsumeTimes), h.MaxReconsumeTimes)
	w.optBool(name(sendBatch), h.Batch)
	w.optStr(name(sendBrokerName), h.BrokerName)
}

// DecodeSendMessageRequestHeader decodes the header of a send request with
// the given code: V1 long names for SEND_MESSAGE (10) and other codes, V2
// letters for SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320) and
// SEND_REPLY_MESSAGE_V2 (325). Leniently, each field is also looked up
// under its other name. Errors name the V1 field.
func DecodeSendMessageRequestHeader(code int32, ext map[string]string) (SendMessageRequestHeader, error) {
	r := extReader{ext: ext, alt: sendV2Name}
	switch code {
	case SendMessageV2, SendBatchMessage, SendReplyMessageV2:
		r.altFirst = true
	}
	h := SendMessageRequestHeader{
		ProducerGroup:         r.str(sendProducerGroup, true),
		Topic:                 r.str(sendTopic, true),
		DefaultTopic:          r.str(sendDefaultTopic, true),
		DefaultTopicQueueNums: r.i32(sendDefaultTopicQueueNums, true),
		QueueID:               r.i32(sendQueueID, true),
		SysFlag:               r.i32(sendSysFlag, true),
		BornTimestamp:         r.i64(sendBornTimestamp, true),
		Flag:                  r.i32(sendFlag, true),
		Properties:            r.str(sendProperties, false),
		ReconsumeTimes:        r.i32(sendReconsumeTimes, false),
		UnitMode:              r.boolean(sendUnitMode, false),
		MaxReconsumeTimes:     r.i32(sendMaxReconsumeTimes, false),
		Batch:                 r.boolean(sendBatch, false),
		BrokerName:            r.str(sendBrokerName, false),
	}
	return h, r.err
}

// SendMessageResponseHeader is the response header of the send commands.
// Required: MsgID, QueueID, QueueOffset.
type SendMessageResponseHeader struct {
	// MsgID is the offsetMsgId of the stored message; for a batch, the
	// offsetMsgIds of all entries joined by ",".
	MsgID       string // msgId
	QueueID     int32  // queueId: the queue written
	QueueOffset int64  // queueOffset: of the (first) message
	// TransactionID is the message's UNIQ_KEY property; optional.
	TransactionID string // transactionId
	// Duplicate (raftmq's own field, FieldDuplicate) marks the answer to a
	// retried send the broker had already stored: the original answer.
	Duplicate bool
}

// FieldDuplicate is the ext field of a send response that marks a
// deduplicated retry ("true").
const FieldDuplicate = "raftmqDuplicate"

// Encode returns the ext fields.
func (h *SendMessageResponseHeader) Encode() map[string]string {
	w := newExtMap(5)
	h.encodeExt(&w)
	return w.m
}

func (h *SendMessageResponseHeader) encodeExt(w *extWriter) {
	w.str("msgId", h.MsgID)
	w.i32(fieldQueueID, h.QueueID)
	w.i64("queueOffset", h.QueueOffset)
	w.optStr("transactionId", h.TransactionID)
	w.optBool(FieldDuplicate, h.Duplicate)
}

// DecodeSendMessageResponseHeader decodes a send response header.
func DecodeSendMessageResponseHeader(ext map[string]string) (SendMessageResponseHeader, error) {
	r := extReader{ext: ext}
	h := SendMessageResponseHeader{
		MsgID:         r.str("msgId", true),
		QueueID:       r.i32(fieldQueueID, true),
		QueueOffset:   r.i64("queueOffset", true),
		TransactionID: r.str("transactionId", false),
		Duplicate:     r.boolean(FieldDuplicate, false),
	}
	return h, r.err
}

// PullMessageRequestHeader is the header of PULL_MESSAGE (11) and
// LITE_PULL_MESSAGE (361). All fields are required except Subscription and
// ExpressionType.
type PullMessageRequestHeader struct {
	ConsumerGroup string // consumerGroup
	Topic         string // topic
	QueueID       int32  // queueId
	QueueOffset   int64  // queueOffset: first consume-queue offset wanted
	MaxMsgNums    int32  // maxMsgNums
	SysFlag       int32  // sysFlag: PullSysFlag* bits
	// CommitOffset (commitOffset) is stored for the group if SysFlag has
	// PullSysFlagCommitOffset.
	CommitOffset         int64
	SuspendTimeoutMillis int64  // suspendTimeoutMillis: long-poll hold time
	Subscription         string // subscription: used with PullSysFlagSubscription
	SubVersion           int64  // subVersion: Go sends 0, Java its subscription's version
	ExpressionType       string // expressionType: "TAG" or "SQL92"
}

// Encode returns the ext fields.
func (h *PullMessageRequestHeader) Encode() map[string]string {
	w := newExtMap(11)
	w.str(fieldConsumerGroup, h.ConsumerGroup)
	w.str(fieldTopic, h.Topic)
	w.i32(fieldQueueID, h.QueueID)
	w.i64("queueOffset", h.QueueOffset)
	w.i32("maxMsgNums", h.MaxMsgNums)
	w.i32("sysFlag", h.SysFlag)
	w.i64("commitOffset", h.CommitOffset)
	w.i64("suspendTimeoutMillis", h.SuspendTimeoutMillis)
	w.optStr("subscription", h.Subscription)
	w.i64("subVersion", h.SubVersion)
	w.optStr("expressionType", h.ExpressionType)
	return w.m
}

// DecodePullMessageRequestHeader decodes a pull request header.
func DecodePullMessageRequestHeader(ext map[string]string) (PullMessageRequestHeader, error) {
	r := extReader{ext: ext}
	h := PullMessageRequestHeader{
		ConsumerGroup:        r.str(fieldConsumerGroup, true),
		Topic:                r.str(fieldTopic, true),
		QueueID:              r.i32(fieldQueueID, true),
		QueueOffset:          r.i64("queueOffset", true),
		MaxMsgNums:           r.i32("maxMsgNums", true),
		SysFlag:              r.i32("sysFlag", true),
		CommitOffset:         r.i64("commitOffset", true),
		SuspendTimeoutMillis: r.i64("suspendTimeoutMillis", true),
		Subscription:         r.str("subscription", false),
		SubVersion:           r.i64("subVersion", true),
		ExpressionType:       r.str("expressionType", false),
	}
	return h, r.err
}

// PullMessageResponseHeader is the response header of PULL_MESSAGE. All
// fields are required.
type PullMessageResponseHeader struct {
	// SuggestWhichBrokerID (suggestWhichBrokerId) is the broker id for the
	// next pull of the queue; raftmq always sends MasterID.
	SuggestWhichBrokerID int64
	NextBeginOffset      int64 // nextBeginOffset: offset to request next
	MinOffset            int64 // minOffset: smallest offset still stored
	MaxOffset            int64 // maxOffset: offset the next message will get
}

// Encode returns the ext fields.
func (h *PullMessageResponseHeader) Encode() map[string]string {
	w := newExtMap(4)
	w.i64("suggestWhichBrokerId", h.SuggestWhichBrokerID)
	w.i64("nextBeginOffset", h.NextBeginOffset)
	w.i64("minOffset", h.MinOffset)
	w.i64("maxOffset", h.MaxOffset)
	return w.m
}

// DecodePullMessageResponseHeader decodes a pull response header.
func DecodePullMessageResponseHeader(ext map[string]string) (PullMessageResponseHeader, error) {
	r := extReader{ext: ext}
	h := PullMessageResponseHeader{
		SuggestWhichBrokerID: r.i64("suggestWhichBrokerId", true),
		NextBeginOffset:      r.i64("nextBeginOffset", true),
		MinOffset:            r.i64("minOffset", true),
		MaxOffset:            r.i64("maxOffset", true),
	}
	return h, r.err
}

// QueryConsumerOffsetRequestHeader is the header of QUERY_CONSUMER_OFFSET
// (14). ConsumerGroup, Topic and QueueID are required.
type QueryConsumerOffsetRequestHeader struct {
	ConsumerGroup string // consumerGroup
	Topic         string // topic
	QueueID       int32  // queueId
	// ExactOnly sends setZeroIfNotFound=false: a group with no stored
	// offset gets QUERY_NOT_FOUND, never the 0 a broker gives (RocketMQ's
	// clients leave the field out) when the queue has lost nothing to
	// retention.
	ExactOnly bool
}

// Encode returns the ext fields.
func (h *QueryConsumerOffsetRequestHeader) Encode() map[string]string {
	w := newExtMap(4)
	w.str(fieldConsumerGroup, h.ConsumerGroup)
	w.str(fieldTopic, h.Topic)
	w.i32(fieldQueueID, h.QueueID)
	if h.ExactOnly {
		w.boolean("setZeroIfNotFound", false)
	}
	return w.m
}

// DecodeQueryConsumerOffsetRequestHeader decodes a QUERY_CONSUMER_OFFSET
// header.
func DecodeQueryConsumerOffsetRequestHeader(ext map[string]string) (QueryConsumerOffsetRequestHeader, error) {
	r := extReader{ext: ext}
	h := QueryConsumerOffsetRequestHeader{
		ConsumerGroup: r.str(fieldConsumerGroup, true),
		Topic:         r.str(fieldTopic, true),
		QueueID:       r.i32(fieldQueueID, true),
	}
	if v, ok := r.get("setZeroIfNotFound"); ok {
		h.ExactOnly = v == "false"
	}
	return h, r.err
}

// QueryConsumerOffsetResponseHeader is the response header of a successful
// QUERY_CONSUMER_OFFSET. Offset is required.
type QueryConsumerOffsetResponseHeader struct {
	Offset int64 // offset: the next offset to consume
}

// Encode returns the ext fields.
func (h *QueryConsumerOffsetResponseHeader) Encode() map[string]string {
	return map[string]string{fieldOffset: strconv.FormatInt(h.Offset, 10)}
}

// DecodeQueryConsumerOffsetResponseHeader decodes a QUERY_CONSUMER_OFFSET
// response header.
func DecodeQueryConsumerOffsetResponseHeader(ext map[string]string) (QueryConsumerOffsetResponseHeader, error) {
	r := extReader{ext: ext}
	h := QueryConsumerOffsetResponseHeader{Offset: r.i64(fieldOffset, true)}
	return h, r.err
}

// UpdateConsumerOffsetRequestHeader is the header of
// UPDATE_CONSUMER_OFFSET (15). All fields are required.
type UpdateConsumerOffsetRequestHeader struct {
	ConsumerGroup string // consumerGroup
	Topic         string // topic
	QueueID       int32  // queueId
	CommitOffset  int64  // commitOffset: the next offset to consume
	// Reset (raftmq's own field, FieldReset) lets the commit move the
	// offset back. Without it raftmq only moves a group's offset forward,
	// so a late copy of an old commit cannot rewind it.
	Reset bool
}

// FieldReset is the ext field of an UPDATE_CONSUMER_OFFSET request that
// makes it a reset ("true"): the offset is set even if it is lower than the
// stored one.
const FieldReset = "raftmqReset"

// Encode returns the ext fields.
func (h *UpdateConsumerOffsetRequestHeader) Encode() map[string]string {
	w := newExtMap(5)
	w.str(fieldConsumerGroup, h.ConsumerGroup)
	w.str(fieldTopic, h.Topic)
	w.i32(fieldQueueID, h.QueueID)
	w.i64("commitOffset", h.CommitOffset)
	w.optBool(FieldReset, h.Reset)
	return w.m
}

// DecodeUpdateConsumerOffsetRequestHeader decodes an
// UPDATE_CONSUMER_OFFSET header.
func DecodeUpdateConsumerOffsetRequestHeader(ext map[string]string) (UpdateConsumerOffsetRequestHeader, error) {
	r := extReader{ext: ext}
	h := UpdateConsumerOffsetRequestHeader{
		ConsumerGroup: r.str(fieldConsumerGroup, true),
		Topic:         r.str(fieldTopic, true),
		QueueID:       r.i32(fieldQueueID, true),
		CommitOffset:  r.i64("commitOffset", true),
		Reset:         r.boolean(FieldReset, false),
	}
	return h, r.err
}

// GetMaxOffsetRequestHeader is the header of GET_MAX_OFFSET (30). All
// fields are required.
type GetMaxOffsetRequestHeader struct {
	Topic   string // topic
	QueueID int32  // queueId
}

// Encode returns the ext fields.
func (h *GetMaxOffsetRequestHeader) Encode() map[string]string {
	return encodeTopicQueue(h.Topic, h.QueueID)
}

// DecodeGetMaxOffsetRequestHeader decodes a GET_MAX_OFFSET header.
func DecodeGetMaxOffsetRequestHeader(ext map[string]string) (GetMaxOffsetRequestHeader, error) {
	topic, queueID, err := decodeTopicQueue(ext)
	return GetMaxOffsetRequestHeader{Topic: topic, QueueID: queueID}, err
}

// GetMinOffsetRequestHeader is the header of GET_MIN_OFFSET (31). All
// fields are required.
type GetMinOffsetRequestHeader struct {
	Topic   string // topic
	QueueID int32  // queueId
}

// Encode returns the ext fields.
func (h *GetMinOffsetRequestHeader) Encode() map[string]string {
	return encodeTopicQueue(h.Topic, h.QueueID)
}

// DecodeGetMinOffsetRequestHeader decodes a GET_MIN_OFFSET header.
func DecodeGetMinOffsetRequestHeader(ext map[string]string) (GetMinOffsetRequestHeader, error) {
	topic, queueID, err := decodeTopicQueue(ext)
	return GetMinOffsetRequestHeader{Topic: topic, QueueID: queueID}, err
}

func encodeTopicQueue(topic string, queueID int32) map[string]string {
	w := newExtMap(2)
	w.str(fieldTopic, topic)
	w.i32(fieldQueueID, queueID)
	return w.m
}

func decodeTopicQueue(ext map[string]string) (string, int32, error) {
	r := extReader{ext: ext}
	topic := r.str(fieldTopic, true)
	queueID := r.i32(fieldQueueID, true)
	return topic, queueID, r.err
}

// OffsetResponseHeader is the response header of GET_MAX_OFFSET,
// GET_MIN_OFFSET and SEARCH_OFFSET_BY_TIMESTAMP. Offset is required.
type OffsetResponseHeader struct {
	Offset int64 // offset
}

// Encode returns the ext fields.
func (h *OffsetResponseHeader) Encode() map[string]string {
	return map[string]string{fieldOffset: strconv.FormatInt(h.Offset, 10)}
}

// DecodeOffsetResponseHeader decodes an offset response header.
func DecodeOffsetResponseHeader(ext map[string]string) (OffsetResponseHeader, error) {
	r := extReader{ext: ext}
	h := OffsetResponseHeader{Offset: r.i64(fieldOffset, true)}
	return h, r.err
}

// SearchOffsetRequestHeader is the header of SEARCH_OFFSET_BY_TIMESTAMP
// (29). All fields are required. (Java's optional boundaryType, "LOWER" by
// default, is left in the ext fields.)
type SearchOffsetRequestHeader struct {
	Topic     string // topic
	QueueID   int32  // queueId
	Timestamp int64  // timestamp: store time, ms
}

// Encode returns the ext fields.
func (h *SearchOffsetRequestHeader) Encode() map[string]string {
	w := newExtMap(3)
	w.str(fieldTopic, h.Topic)
	w.i32(fieldQueueID, h.QueueID)
	w.i64("timestamp", h.Timestamp)
	return w.m
}

// DecodeSearchOffsetRequestHeader decodes a SEARCH_OFFSET_BY_TIMESTAMP
// header.
func DecodeSearchOffsetRequestHeader(ext map[string]string) (SearchOffsetRequestHeader, error) {
	r := extReader{ext: ext}
	h := SearchOffsetRequestHeader{
		Topic:     r.str(fieldTopic, true),
		QueueID:   r.i32(fieldQueueID, true),
		Timestamp: r.i64("timestamp", true),
	}
	return h, r.err
}

// CreateTopicRequestHeader is the header of UPDATE_AND_CREATE_TOPIC (17).
// Required: Topic, DefaultTopic, ReadQueueNums, WriteQueueNums, Perm,
// TopicFilterType, Order.
type CreateTopicRequestHeader struct {
	Topic           string // topic
	DefaultTopic    string // defaultTopic
	ReadQueueNums   int32  // readQueueNums
	WriteQueueNums  int32  // writeQueueNums
	Perm            int32  // perm: Perm* bits
	TopicFilterType string // topicFilterType: "SINGLE_TAG" or "MULTI_TAG"
	TopicSysFlag    int32  // topicSysFlag
	Order           bool   // order
}

// Encode returns the ext fields.
func (h *CreateTopicRequestHeader) Encode() map[string]string {
	w := newExtMap(8)
	w.str(fieldTopic, h.Topic)
	w.str("defaultTopic", h.DefaultTopic)
	w.i32("readQueueNums", h.ReadQueueNums)
	w.i32("writeQueueNums", h.WriteQueueNums)
	w.i32("perm", h.Perm)
	w.str("topicFilterType", h.TopicFilterType)
	w.optI32("topicSysFlag", h.TopicSysFlag)
	w.boolean("order", h.Order)
	return w.m
}

// DecodeCreateTopicRequestHeader decodes an UPDATE_AND_CREATE_TOPIC header.
func DecodeCreateTopicRequestHeader(ext map[string]string) (CreateTopicRequestHeader, error) {
	r := extReader{ext: ext}
	h := CreateTopicRequestHeader{
		Topic:           r.str(fieldTopic, true),
		DefaultTopic:    r.str("defaultTopic", true),
		ReadQueueNums:   r.i32("readQueueNums", true),
		WriteQueueNums:  r.i32("writeQueueNums", true),
		Perm:            r.i32("perm", true),
		TopicFilterType: r.str("topicFilterType", true),
		TopicSysFlag:    r.i32("topicSysFlag", false),
		Order:           r.boolean("order", true),
	}
	return h, r.err
}

// GetRouteInfoRequestHeader is the header of GET_ROUTEINFO_BY_TOPIC (105).
// Topic is required.
type GetRouteInfoRequestHeader struct {
	Topic string // topic
	// AcceptStandardJSONOnly (acceptStandardJsonOnly, optional) asks an
	// Apache name server for standard JSON (quoted map keys) in the route
	// body. raftmq's clients set it; raftmq's name server always answers
	// standard JSON.
	AcceptStandardJSONOnly bool
}

// Encode returns the ext fields.
func (h *GetRouteInfoRequestHeader) Encode() map[string]string {
	w := newExtMap(2)
	w.str(fieldTopic, h.Topic)
	w.optBool("acceptStandardJsonOnly", h.AcceptStandardJSONOnly)
	return w.m
}

// DecodeGetRouteInfoRequestHeader decodes a GET_ROUTEINFO_BY_TOPIC header.
func DecodeGetRouteInfoRequestHeader(ext map[string]string) (GetRouteInfoRequestHeader, error) {
	r := extReader{ext: ext}
	h := GetRouteInfoRequestHeader{
		Topic:                  r.str(fieldTopic, true),
		AcceptStandardJSONOnly: r.boolean("acceptStandardJsonOnly", false),
	}
	return h, r.err
}

// GetConsumerListByGroupRequestHeader is the header of
// GET_CONSUMER_LIST_BY_GROUP (38); the response body is a ConsumerListBody.
// ConsumerGroup is required.
type GetConsumerListByGroupRequestHeader struct {
	ConsumerGroup string // consumerGroup
}

// Encode returns the ext fields.
func (h *GetConsumerListByGroupRequestHeader) Encode() map[string]string {
	return map[string]string{fieldConsumerGroup: h.ConsumerGroup}
}

// DecodeGetConsumerListByGroupRequestHeader decodes a
// GET_CONSUMER_LIST_BY_GROUP header.
func DecodeGetConsumerListByGroupRequestHeader(ext map[string]string) (GetConsumerListByGroupRequestHeader, error) {
	r := extReader{ext: ext}
	h := GetConsumerListByGroupRequestHeader{ConsumerGroup: r.str(fieldConsumerGroup, true)}
	return h, r.err
}

// ConsumerSendMsgBackRequestHeader is the header of CONSUMER_SEND_MSG_BACK
// (36). Required: Offset, Group, DelayLevel.
type ConsumerSendMsgBackRequestHeader struct {
	Offset      int64  // offset: the message's commit log (physical) offset
	Group       string // group: consumer group
	DelayLevel  int32  // delayLevel: 0 = broker's choice, < 0 = straight to DLQ
	OriginMsgID string // originMsgId
	OriginTopic string // originTopic
	UnitMode    bool   // unitMode
	// MaxReconsumeTimes (maxReconsumeTimes): 0 means not sent.
	MaxReconsumeTimes int32
}

// Encode returns the ext fields.
func (h *ConsumerSendMsgBackRequestHeader) Encode() map[string]string {
	w := newExtMap(7)
	w.i64(fieldOffset, h.Offset)
	w.str("group", h.Group)
	w.i32("delayLevel", h.DelayLevel)
	w.optStr("originMsgId", h.OriginMsgID)
	w.optStr("originTopic", h.OriginTopic)
	w.boolean("unitMode", h.UnitMode)
	w.optI32("maxReconsumeTimes", h.MaxReconsumeTimes)
	return w.m
}

// DecodeConsumerSendMsgBackRequestHeader decodes a CONSUMER_SEND_MSG_BACK
// header.
func DecodeConsumerSendMsgBackRequestHeader(ext map[string]string) (ConsumerSendMsgBackRequestHeader, error) {
	r := extReader{ext: ext}
	h := ConsumerSendMsgBackRequestHeader{
		Offset:            r.i64(fieldOffset, true),
		Group:             r.str("group", true),
		DelayLevel:        r.i32("delayLevel", true),
		OriginMsgID:       r.str("originMsgId", false),
		OriginTopic:       r.str("originTopic", false),
		UnitMode:          r.boolean("unitMode", false),
		MaxReconsumeTimes: r.i32("maxReconsumeTimes", false),
	}
	return h, r.err
}
