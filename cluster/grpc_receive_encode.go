package cluster

import (
	"crypto/md5"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/protocol/grpc/rmqpb"
)

// grpcReceived is one popped message as a ReceiveMessageResponse stream
// message (its `message` case). It encodes itself (h2.Encoded) as
// proto.Marshal encodes the response around grpcMessage's conversion with
// the receipt handle set (a differential test holds the two to the same
// decoding), without building the generated messages: on the lean
// transport a receive's conversion and marshalling cost three times its
// pop (docs/benchmarks.md, "Pop over gRPC").
type grpcReceived struct {
	m       *message.Message
	topic   string
	receipt string
	// scratch holds the encoded SystemProperties while the message's
	// length is worked out; reused from message to message.
	scratch *[]byte
}

// grpcReceivable reports whether every string grpcReceived writes for m
// is valid UTF-8 (they all come from the topic and the properties), as
// protobuf requires of string fields: proto.Marshal refuses one that is
// not, so ReceiveMessage sends such a message the generated way and fails
// as it did before grpcReceived.
func grpcReceivable(m *message.Message, topic string) bool {
	if !utf8.ValidString(topic) {
		return false
	}
	for k, v := range m.Properties {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return false
		}
	}
	return true
}

// upperHex are the digits of an upper-case hex checksum.
const upperHex = "0123456789ABCDEF"

// AppendProto appends the ReceiveMessageResponse encoding.
func (r *grpcReceived) AppendProto(b []byte) []byte {
	m := r.m
	sp := r.appendSystemProperties((*r.scratch)[:0])
	*r.scratch = sp
	// Message: topic (1), user_properties (2), system_properties (3), body (4).
	topicLen := 0
	if r.topic != "" {
		topicLen = protowire.SizeTag(2) + protowire.SizeBytes(len(r.topic))
	}
	n := protowire.SizeTag(1) + protowire.SizeBytes(topicLen)
	for k, v := range m.Properties {
		if !systemPropertyNames[k] {
			n += protowire.SizeTag(2) + protowire.SizeBytes(mapEntrySize(k, v))
		}
	}
	n += protowire.SizeTag(3) + protowire.SizeBytes(len(sp))
	if len(m.Body) > 0 {
		n += protowire.SizeTag(4) + protowire.SizeBytes(len(m.Body))
	}
	b = protowire.AppendTag(b, 2, protowire.BytesType) // ReceiveMessageResponse.message
	b = protowire.AppendVarint(b, uint64(n))
	b = protowire.AppendTag(b, 1, protowire.BytesType) // topic: Resource
	b = protowire.AppendVarint(b, uint64(topicLen))
	if r.topic != "" {
		b = protowire.AppendTag(b, 2, protowire.BytesType) // Resource.name
		b = protowire.AppendString(b, r.topic)
	}
	for k, v := range m.Properties {
		if systemPropertyNames[k] {
			continue
		}
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(mapEntrySize(k, v)))
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, k)
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendString(b, v)
	}
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	b = protowire.AppendBytes(b, sp)
	if len(m.Body) > 0 {
		b = protowire.AppendTag(b, 4, protowire.BytesType)
		b = protowire.AppendBytes(b, m.Body)
	}
	return b
}

// mapEntrySize is the size of a map<string, string> entry's message: both
// fields are written even when empty, as proto.Marshal writes them.
func mapEntrySize(k, v string) int {
	return protowire.SizeTag(1) + protowire.SizeBytes(len(k)) + protowire.SizeTag(2) + protowire.SizeBytes(len(v))
}

// appendSystemProperties appends the SystemProperties fields (without a
// tag and length of their own), in field order, with grpcMessage's rules.
func (r *grpcReceived) appendSystemProperties(b []byte) []byte {
	m := r.m
	props := m.Properties
	if t, found := props[message.PropertyTags]; found {
		b = appendStringField(b, 1, t)
	}
	if k := props[message.PropertyKeys]; k != "" {
		for key := range strings.SplitSeq(k, message.KeySeparator) { // as message.SplitKeys
			if key != "" {
				b = appendStringField(b, 2, key)
			}
		}
	}
	if id := grpcMessageID(m); id != "" {
		b = appendStringField(b, 3, id)
	}
	// body_digest (4): MD5, upper-case hex.
	sum := md5.Sum(m.Body)
	var hexSum [2 * md5.Size]byte
	for i, c := range sum {
		hexSum[2*i], hexSum[2*i+1] = upperHex[c>>4], upperHex[c&0xf]
	}
	b = protowire.AppendTag(b, 4, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(protowire.SizeTag(1)+protowire.SizeVarint(uint64(rmqpb.DigestType_MD5))+protowire.SizeTag(2)+protowire.SizeBytes(len(hexSum))))
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(rmqpb.DigestType_MD5))
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendBytes(b, hexSum[:])
	b = protowire.AppendTag(b, 5, protowire.VarintType) // body_encoding
	b = protowire.AppendVarint(b, uint64(rmqpb.Encoding_IDENTITY))
	msgType, group, deliverMS, hasDeliver := rmqpb.MessageType_NORMAL, "", int64(0), false
	switch {
	case props[message.PropertyTransactionPrepared] == "true" || m.SysFlag&message.SysFlagTransactionMask != 0:
		msgType = rmqpb.MessageType_TRANSACTION
	case props[message.PropertyTimerDeliverMS] != "":
		msgType = rmqpb.MessageType_DELAY
		if ms, err := strconv.ParseInt(props[message.PropertyTimerDeliverMS], 10, 64); err == nil {
			deliverMS, hasDeliver = ms, true
		}
	case props[message.PropertyShardingKey] != "":
		msgType = rmqpb.MessageType_FIFO
		group = props[message.PropertyShardingKey]
	}
	b = protowire.AppendTag(b, 6, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(msgType))
	b = appendTimestampField(b, 7, m.BornTimestamp)
	var host [64]byte
	if m.BornHost.IsValid() { // hostString
		b = protowire.AppendTag(b, 8, protowire.BytesType)
		b = protowire.AppendBytes(b, m.BornHost.AppendTo(host[:0]))
	}
	b = appendTimestampField(b, 9, m.StoreTimestamp)
	b = protowire.AppendTag(b, 10, protowire.BytesType) // StoreHost.String(), never empty
	if m.StoreHost.IsValid() {
		b = protowire.AppendBytes(b, m.StoreHost.AppendTo(host[:0]))
	} else {
		b = protowire.AppendString(b, m.StoreHost.String())
	}
	if hasDeliver {
		b = appendTimestampField(b, 11, deliverMS)
	}
	b = appendStringField(b, 12, r.receipt)
	if m.QueueID != 0 {
		b = protowire.AppendTag(b, 13, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(int64(m.QueueID)))
	}
	b = protowire.AppendTag(b, 14, protowire.VarintType) // queue_offset, optional: always
	b = protowire.AppendVarint(b, uint64(m.QueueOffset))
	b = protowire.AppendTag(b, 16, protowire.VarintType) // delivery_attempt, optional: always
	b = protowire.AppendVarint(b, uint64(int64(m.ReconsumeTimes+1)))
	if msgType == rmqpb.MessageType_FIFO {
		b = appendStringField(b, 17, group)
	}
	if tc := props[propTraceContext]; tc != "" {
		b = appendStringField(b, 18, tc)
	}
	if s := props[message.PropertyCheckImmunityTimeSeconds]; s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			d := time.Duration(n) * time.Second
			b = appendDurationField(b, 19, int64(d/time.Second), int32(d%time.Second))
		}
	}
	return b
}

// appendStringField appends a string field, written even when empty (an
// optional or repeated field, or one the caller checked).
func appendStringField(b []byte, num protowire.Number, s string) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// appendTimestampField appends a google.protobuf.Timestamp field of the
// time ms milliseconds after the epoch, as timestamppb.New(time.UnixMilli(ms)).
func appendTimestampField(b []byte, num protowire.Number, ms int64) []byte {
	t := time.UnixMilli(ms)
	return appendDurationField(b, num, t.Unix(), int32(t.Nanosecond()))
}

// appendDurationField appends a message of seconds (1) and nanos (2), the
// shape of google.protobuf.Timestamp and Duration, zero fields left out.
func appendDurationField(b []byte, num protowire.Number, sec int64, nanos int32) []byte {
	n := 0
	if sec != 0 {
		n += protowire.SizeTag(1) + protowire.SizeVarint(uint64(sec))
	}
	if nanos != 0 {
		n += protowire.SizeTag(2) + protowire.SizeVarint(uint64(int64(nanos)))
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(n))
	if sec != 0 {
		b = protowire.AppendTag(b, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(sec))
	}
	if nanos != 0 {
		b = protowire.AppendTag(b, 2, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(int64(nanos)))
	}
	return b
}
