package cluster

import (
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/raftmq/raftmq/protocol/grpc/rmqpb"
)

// A leader's inline SendMessage (grpcService.inline) decodes its request
// here rather than with proto.Unmarshal: the fields planSend and sendOK
// read, into one allocation, the body left in the request's buffer (it is
// copied into the raft entry before the call is answered). Anything this
// decoder does not take plainly (several messages, a message field given
// twice, which protobuf would merge, a wire type other than the field's,
// malformed bytes, a string that is not UTF-8) returns nil, and the call
// goes to the generic path, which decides as before. Fields no send reads
// (the body digest, store and receipt fields, the dead-letter queue, ...)
// are checked as proto.Unmarshal checks them and not kept.

// grpcSendDecoded is one decoded message with the fields it points to.
type grpcSendDecoded struct {
	m                  rmqpb.Message
	topic              rmqpb.Resource
	sp                 rmqpb.SystemProperties
	born, due          timestamppb.Timestamp
	orphan             durationpb.Duration
	tag, group, traceC string
}

// decodeSendOne decodes raw, a SendMessageRequest, if it holds one
// message this decoder takes; else it returns nil.
func decodeSendOne(raw []byte) *rmqpb.Message {
	var d *grpcSendDecoded
	for len(raw) > 0 {
		num, typ, n := protowire.ConsumeTag(raw)
		if n < 0 || num > protowire.MaxValidNumber {
			return nil
		}
		raw = raw[n:]
		if num == 1 {
			if typ != protowire.BytesType || d != nil {
				return nil
			}
			v, n := protowire.ConsumeBytes(raw)
			if n < 0 {
				return nil
			}
			raw = raw[n:]
			d = new(grpcSendDecoded)
			if !d.message(v) {
				return nil
			}
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, raw)
		if n < 0 {
			return nil
		}
		raw = raw[n:]
	}
	if d == nil {
		return nil
	}
	return &d.m
}

// wireField is one field of a message being decoded: its number and
// wire type, and its value (v for bytes, x for varints).
type wireField struct {
	num protowire.Number
	typ protowire.Type
	v   []byte
	x   uint64
}

// fields calls f for each field of b, with the value consumed; it
// returns false when b is malformed or f refuses a field.
func fields(b []byte, f func(wireField) bool) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		// ConsumeTag lets through numbers past the largest valid one,
		// which proto.Unmarshal refuses.
		if n < 0 || num > protowire.MaxValidNumber {
			return false
		}
		b = b[n:]
		w := wireField{num: num, typ: typ}
		switch typ {
		case protowire.BytesType:
			w.v, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			w.x, n = protowire.ConsumeVarint(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return false
		}
		b = b[n:]
		if !f(w) {
			return false
		}
	}
	return true
}

// str is w's value as a string, if w is a valid string field.
func (w wireField) str() (string, bool) {
	if w.typ != protowire.BytesType || !utf8.Valid(w.v) {
		return "", false
	}
	return string(w.v), true
}

// validStr reports whether w is a valid string field.
func (w wireField) validStr() bool { return w.typ == protowire.BytesType && utf8.Valid(w.v) }

// isVarint reports whether w is a varint field.
func (w wireField) isVarint() bool { return w.typ == protowire.VarintType }

// message decodes b, a Message, into d. Unknown fields are skipped (the
// generic path keeps them aside, and no send reads them).
func (d *grpcSendDecoded) message(b []byte) bool {
	m := &d.m
	var seenTopic, seenSP, seenBody bool
	return fields(b, func(w wireField) bool {
		switch w.num {
		case 1: // topic
			if w.typ != protowire.BytesType || seenTopic {
				return false
			}
			seenTopic = true
			m.Topic = &d.topic
			return fields(w.v, func(w wireField) bool {
				switch w.num {
				case 1:
					return w.validStr()
				case 2:
					var ok bool
					d.topic.Name, ok = w.str()
					return ok
				}
				return true
			})
		case 2: // user_properties: a map entry
			if w.typ != protowire.BytesType {
				return false
			}
			var k, v string
			if !fields(w.v, func(w wireField) bool {
				var ok bool
				switch w.num {
				case 1:
					k, ok = w.str()
				case 2:
					v, ok = w.str()
				default:
					ok = true
				}
				return ok
			}) {
				return false
			}
			if m.UserProperties == nil {
				m.UserProperties = map[string]string{}
			}
			m.UserProperties[k] = v
			return true
		case 3: // system_properties
			if w.typ != protowire.BytesType || seenSP {
				return false
			}
			seenSP = true
			m.SystemProperties = &d.sp
			return d.systemProperties(w.v)
		case 4: // body
			if w.typ != protowire.BytesType || seenBody {
				return false
			}
			seenBody = true
			m.Body = w.v
			return true
		}
		return true
	})
}

func (d *grpcSendDecoded) systemProperties(b []byte) bool {
	sp := &d.sp
	var seen [23]bool
	return fields(b, func(w wireField) bool {
		var ok bool
		if w.num < protowire.Number(len(seen)) {
			switch w.typ {
			case protowire.BytesType:
				// A message or a string given twice: protobuf merges or
				// overwrites; left to it (keys, 2, is repeated).
				if seen[w.num] && w.num != 2 {
					return false
				}
			}
			seen[w.num] = true
		}
		switch w.num {
		case 1:
			d.tag, ok = w.str()
			sp.Tag = &d.tag
		case 2:
			var k string
			k, ok = w.str()
			sp.Keys = append(sp.Keys, k)
		case 3:
			sp.MessageId, ok = w.str()
		case 4: // body_digest
			ok = w.typ == protowire.BytesType && fields(w.v, func(w wireField) bool {
				switch w.num {
				case 1:
					return w.isVarint()
				case 2:
					return w.validStr()
				}
				return true
			})
		case 5:
			sp.BodyEncoding, ok = rmqpb.Encoding(int32(w.x)), w.isVarint()
		case 6:
			sp.MessageType, ok = rmqpb.MessageType(int32(w.x)), w.isVarint()
		case 7:
			sp.BornTimestamp, ok = &d.born, timestamp(w, &d.born.Seconds, &d.born.Nanos)
		case 9, 15: // store_timestamp, invisible_duration: checked, not kept
			var s int64
			var n int32
			ok = timestamp(w, &s, &n)
		case 11:
			sp.DeliveryTimestamp, ok = &d.due, timestamp(w, &d.due.Seconds, &d.due.Nanos)
		case 19:
			sp.OrphanedTransactionRecoveryDuration, ok = &d.orphan, timestamp(w, &d.orphan.Seconds, &d.orphan.Nanos)
		case 8, 10, 12, 21: // born_host, store_host, receipt_handle, lite_topic
			ok = w.validStr()
		case 13, 14, 16, 22: // queue_id, queue_offset, delivery_attempt, priority
			ok = w.isVarint()
		case 17:
			d.group, ok = w.str()
			sp.MessageGroup = &d.group
		case 18:
			d.traceC, ok = w.str()
			sp.TraceContext = &d.traceC
		case 20: // dead_letter_queue
			ok = w.typ == protowire.BytesType && fields(w.v, func(w wireField) bool {
				if w.num == 1 || w.num == 2 {
					return w.validStr()
				}
				return true
			})
		default:
			ok = true
		}
		return ok
	})
}

// timestamp decodes w, a google.protobuf.Timestamp or Duration (seconds
// 1, nanos 2), into s and n.
func timestamp(w wireField, s *int64, n *int32) bool {
	return w.typ == protowire.BytesType && fields(w.v, func(w wireField) bool {
		switch w.num {
		case 1:
			*s = int64(w.x)
			return w.isVarint()
		case 2:
			*n = int32(w.x)
			return w.isVarint()
		}
		return true
	})
}
