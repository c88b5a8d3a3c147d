package remoting

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// Admin wire types: the request codes mqadmin and the RocketMQ dashboard
// send to a broker to inspect and change it, their headers, and their
// bodies in the shapes RocketMQ's tools parse.
//
// Several RocketMQ admin bodies are Java maps keyed by MessageQueue, which
// fastjson writes with the key object itself in the key position:
//
//	{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:{"minOffset":0,...},...}}
//
// That is not JSON (RFC 8259), but it is what the Java tools read, and
// rocketmq-client-go reads it too (its ResetOffsetBody decoder falls back
// to this form). AppendMQMap writes it; DecodeMQMap reads it.

// RocketMQ admin request codes served by the broker.
const (
	GetBrokerRuntimeInfo      int32 = 28
	GetTopicStatsInfo         int32 = 202
	GetConsumerConnectionList int32 = 203
	GetProducerConnectionList int32 = 204
	GetConsumeStats           int32 = 208
	InvokeBrokerToResetOffset int32 = 222
)

// ImportConfig is raftmq's admin code (in AdminCodeMin..AdminCodeMax) that
// replicates RocketMQ config files (topics, subscription groups, consumer
// offsets) into a running group; its body is an ImportConfigBody.
const ImportConfig int32 = 9006

// FieldAdminView is an ext field raftmq's own tools add to an admin
// request: with the value AdminViewJSON the answer's body is the broker's
// admin view as plain JSON (package cluster's Admin* structs, with the
// figures RocketMQ's bodies have no room for) instead of RocketMQ's body.
// RocketMQ's tools never send it.
const (
	FieldAdminView = "raftmqView"
	AdminViewJSON  = "json"
)

// TopicStatsRequestHeader is the header of GET_TOPIC_STATS_INFO (202).
type TopicStatsRequestHeader struct {
	Topic string // topic
}

// Encode returns the ext fields.
func (h *TopicStatsRequestHeader) Encode() map[string]string {
	w := newExtMap(1)
	w.str(fieldTopic, h.Topic)
	return w.m
}

// DecodeTopicStatsRequestHeader decodes a GET_TOPIC_STATS_INFO header.
func DecodeTopicStatsRequestHeader(ext map[string]string) (TopicStatsRequestHeader, error) {
	r := extReader{ext: ext}
	h := TopicStatsRequestHeader{Topic: r.str(fieldTopic, true)}
	return h, r.err
}

// ConsumeStatsRequestHeader is the header of GET_CONSUME_STATS (208); an
// empty Topic asks for every topic the group has offsets in.
type ConsumeStatsRequestHeader struct {
	ConsumerGroup string // consumerGroup
	Topic         string // topic
}

// Encode returns the ext fields.
func (h *ConsumeStatsRequestHeader) Encode() map[string]string {
	w := newExtMap(2)
	w.str(fieldConsumerGroup, h.ConsumerGroup)
	w.optStr(fieldTopic, h.Topic)
	return w.m
}

// DecodeConsumeStatsRequestHeader decodes a GET_CONSUME_STATS header.
func DecodeConsumeStatsRequestHeader(ext map[string]string) (ConsumeStatsRequestHeader, error) {
	r := extReader{ext: ext}
	h := ConsumeStatsRequestHeader{ConsumerGroup: r.str(fieldConsumerGroup, true), Topic: r.str(fieldTopic, false)}
	return h, r.err
}

// ConsumerConnectionRequestHeader is the header of
// GET_CONSUMER_CONNECTION_LIST (203).
type ConsumerConnectionRequestHeader struct {
	ConsumerGroup string // consumerGroup
}

// Encode returns the ext fields.
func (h *ConsumerConnectionRequestHeader) Encode() map[string]string {
	w := newExtMap(1)
	w.str(fieldConsumerGroup, h.ConsumerGroup)
	return w.m
}

// DecodeConsumerConnectionRequestHeader decodes a
// GET_CONSUMER_CONNECTION_LIST header.
func DecodeConsumerConnectionRequestHeader(ext map[string]string) (ConsumerConnectionRequestHeader, error) {
	r := extReader{ext: ext}
	h := ConsumerConnectionRequestHeader{ConsumerGroup: r.str(fieldConsumerGroup, true)}
	return h, r.err
}

// ProducerConnectionRequestHeader is the header of
// GET_PRODUCER_CONNECTION_LIST (204).
type ProducerConnectionRequestHeader struct {
	ProducerGroup string // producerGroup
}

// Encode returns the ext fields.
func (h *ProducerConnectionRequestHeader) Encode() map[string]string {
	w := newExtMap(1)
	w.str("producerGroup", h.ProducerGroup)
	return w.m
}

// DecodeProducerConnectionRequestHeader decodes a
// GET_PRODUCER_CONNECTION_LIST header.
func DecodeProducerConnectionRequestHeader(ext map[string]string) (ProducerConnectionRequestHeader, error) {
	r := extReader{ext: ext}
	h := ProducerConnectionRequestHeader{ProducerGroup: r.str("producerGroup", true)}
	return h, r.err
}

// ProducerConnection is the body of a GET_PRODUCER_CONNECTION_LIST answer.
type ProducerConnection struct {
	ConnectionSet []ConnectionInfo `json:"connectionSet"`
}

// ResetOffsetRequestHeader is the header of INVOKE_BROKER_TO_RESET_OFFSET
// (222, admin to broker) and of RESET_CONSUMER_CLIENT_OFFSET (220, broker
// to client). Timestamp is in Unix milliseconds; -1 means the end of each
// queue (mqadmin's skipAccumulatedMessage). IsForce false moves an offset
// back only.
type ResetOffsetRequestHeader struct {
	Topic     string // topic
	Group     string // group
	Timestamp int64  // timestamp
	IsForce   bool   // isForce
}

// Encode returns the ext fields.
func (h *ResetOffsetRequestHeader) Encode() map[string]string {
	w := newExtMap(4)
	w.str(fieldTopic, h.Topic)
	w.str("group", h.Group)
	w.i64("timestamp", h.Timestamp)
	w.str("isForce", strconv.FormatBool(h.IsForce))
	return w.m
}

// DecodeResetOffsetRequestHeader decodes an INVOKE_BROKER_TO_RESET_OFFSET
// header.
func DecodeResetOffsetRequestHeader(ext map[string]string) (ResetOffsetRequestHeader, error) {
	r := extReader{ext: ext}
	h := ResetOffsetRequestHeader{Topic: r.str(fieldTopic, true), Group: r.str("group", true),
		Timestamp: r.i64("timestamp", true), IsForce: r.boolean("isForce", false)}
	return h, r.err
}

// TopicOffset is one queue's entry in a TopicStatsTable.
type TopicOffset struct {
	MinOffset           int64 `json:"minOffset"`
	MaxOffset           int64 `json:"maxOffset"`
	LastUpdateTimestamp int64 `json:"lastUpdateTimestamp"`
}

// OffsetWrapper is one queue's entry in a ConsumeStats.
type OffsetWrapper struct {
	BrokerOffset   int64 `json:"brokerOffset"`
	ConsumerOffset int64 `json:"consumerOffset"`
	PullOffset     int64 `json:"pullOffset"`
	LastTimestamp  int64 `json:"lastTimestamp"`
}

// EncodeTopicStatsTable returns the body of a GET_TOPIC_STATS_INFO answer:
// {"offsetTable":{MQ:TopicOffset,...}}.
func EncodeTopicStatsTable(t map[MessageQueue]TopicOffset) ([]byte, error) {
	b := []byte(`{"offsetTable":`)
	b, err := AppendMQMap(b, t)
	if err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

// DecodeTopicStatsTable decodes a GET_TOPIC_STATS_INFO body.
func DecodeTopicStatsTable(body []byte) (map[MessageQueue]TopicOffset, error) {
	return decodeMQTable[TopicOffset](body, nil)
}

// EncodeConsumeStats returns the body of a GET_CONSUME_STATS answer:
// {"offsetTable":{MQ:OffsetWrapper,...},"consumeTps":tps}.
func EncodeConsumeStats(t map[MessageQueue]OffsetWrapper, tps float64) ([]byte, error) {
	b := []byte(`{"offsetTable":`)
	b, err := AppendMQMap(b, t)
	if err != nil {
		return nil, err
	}
	b = append(b, `,"consumeTps":`...)
	b = strconv.AppendFloat(b, tps, 'f', -1, 64)
	return append(b, '}'), nil
}

// DecodeConsumeStats decodes a GET_CONSUME_STATS body.
func DecodeConsumeStats(body []byte) (map[MessageQueue]OffsetWrapper, float64, error) {
	var tps float64
	t, err := decodeMQTable[OffsetWrapper](body, map[string]any{"consumeTps": &tps})
	return t, tps, err
}

// EncodeResetOffsetBody returns the body of an INVOKE_BROKER_TO_RESET_OFFSET
// answer and of RESET_CONSUMER_CLIENT_OFFSET: {"offsetTable":{MQ:offset,...}}.
func EncodeResetOffsetBody(t map[MessageQueue]int64) ([]byte, error) {
	b := []byte(`{"offsetTable":`)
	b, err := AppendMQMap(b, t)
	if err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

// DecodeResetOffsetBody decodes a ResetOffsetBody.
func DecodeResetOffsetBody(body []byte) (map[MessageQueue]int64, error) {
	return decodeMQTable[int64](body, nil)
}

// ConnectionInfo is one client connection in a ConsumerConnection
// (RocketMQ's Connection; language is the enum name, "JAVA", "GO").
type ConnectionInfo struct {
	ClientID   string `json:"clientId"`
	ClientAddr string `json:"clientAddr"`
	Language   string `json:"language"`
	Version    int32  `json:"version"`
}

// ConsumerConnection is the body of a GET_CONSUMER_CONNECTION_LIST answer.
type ConsumerConnection struct {
	ConnectionSet     []ConnectionInfo            `json:"connectionSet"`
	SubscriptionTable map[string]SubscriptionData `json:"subscriptionTable"`
	ConsumeType       string                      `json:"consumeType,omitempty"`
	MessageModel      string                      `json:"messageModel,omitempty"`
	ConsumeFromWhere  string                      `json:"consumeFromWhere,omitempty"`
}

// MarshalJSON writes nil collections as [] and {}.
func (c ConsumerConnection) MarshalJSON() ([]byte, error) {
	type plain ConsumerConnection
	p := plain(c)
	if p.ConnectionSet == nil {
		p.ConnectionSet = []ConnectionInfo{}
	}
	if p.SubscriptionTable == nil {
		p.SubscriptionTable = map[string]SubscriptionData{}
	}
	return json.Marshal(p)
}

// ImportConfigBody is the body of raftmq's IMPORT_CONFIG: what a
// directory of RocketMQ config files holds, parsed and validated by the
// sender (package offsets). Topics and groups are RocketMQ's TopicConfig
// and SubscriptionGroupConfig JSON.
type ImportConfigBody struct {
	Topics  []json.RawMessage    `json:"topics"`
	Groups  []json.RawMessage    `json:"groups"`
	Offsets []ImportConfigOffset `json:"offsets"`
}

// ImportConfigOffset is one consumer offset of an ImportConfigBody.
type ImportConfigOffset struct {
	Group   string `json:"group"`
	Topic   string `json:"topic"`
	QueueID int32  `json:"queueId"`
	Offset  int64  `json:"offset"`
}

// compareMQ orders queues by topic, broker name, then queue id.
func compareMQ(a, b MessageQueue) int {
	if a.Topic != b.Topic {
		if a.Topic < b.Topic {
			return -1
		}
		return 1
	}
	if a.BrokerName != b.BrokerName {
		if a.BrokerName < b.BrokerName {
			return -1
		}
		return 1
	}
	return int(a.QueueID) - int(b.QueueID)
}

// AppendMQMap appends m in fastjson's form of a map keyed by MessageQueue,
// queues in order, each key written with fastjson's sorted field names.
func AppendMQMap[V any](dst []byte, m map[MessageQueue]V) ([]byte, error) {
	dst = append(dst, '{')
	for i, mq := range slices.SortedFunc(maps.Keys(m), compareMQ) {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"brokerName":`...)
		dst = appendJSONString(dst, mq.BrokerName)
		dst = append(dst, `,"queueId":`...)
		dst = strconv.AppendInt(dst, int64(mq.QueueID), 10)
		dst = append(dst, `,"topic":`...)
		dst = appendJSONString(dst, mq.Topic)
		dst = append(dst, "}:"...)
		v, err := json.Marshal(m[mq])
		if err != nil {
			return nil, fmt.Errorf("remoting: encode %v: %w", mq, err)
		}
		dst = append(dst, v...)
	}
	return append(dst, '}'), nil
}

// DecodeMQMap reads a map keyed by MessageQueue written as fastjson does
// (data starts at its '{'), calling fn with each key and the raw JSON of
// its value; it returns the bytes after the map. An empty map is {}.
func DecodeMQMap(data []byte, fn func(MessageQueue, json.RawMessage) error) (rest []byte, err error) {
	p := bytes.TrimLeft(data, " \t\r\n")
	bad := func(what string) error {
		return fmt.Errorf("remoting: MessageQueue map: %s at %q: %w", what, clip(p), ErrMalformed)
	}
	if len(p) == 0 || p[0] != '{' {
		return nil, bad("want '{'")
	}
	p = bytes.TrimLeft(p[1:], " \t\r\n")
	if len(p) > 0 && p[0] == '}' {
		return p[1:], nil
	}
	for {
		// The key is a JSON object; then ':' and the value, one JSON
		// value each, read with a decoder that reports where it stopped.
		var mq MessageQueue
		n, err := decodeOne(p, &mq)
		if err != nil {
			return nil, bad(fmt.Sprintf("key: %v", err))
		}
		p = bytes.TrimLeft(p[n:], " \t\r\n")
		if len(p) == 0 || p[0] != ':' {
			return nil, bad("want ':'")
		}
		p = p[1:]
		var raw json.RawMessage
		if n, err = decodeOne(p, &raw); err != nil {
			return nil, bad(fmt.Sprintf("value: %v", err))
		}
		if err := fn(mq, raw); err != nil {
			return nil, err
		}
		p = bytes.TrimLeft(p[n:], " \t\r\n")
		if len(p) == 0 {
			return nil, bad("unterminated")
		}
		switch p[0] {
		case ',':
			p = bytes.TrimLeft(p[1:], " \t\r\n")
		case '}':
			return p[1:], nil
		default:
			return nil, bad("want ',' or '}'")
		}
	}
}

// decodeOne decodes the JSON value at the start of p into v and returns
// how many bytes it took.
func decodeOne(p []byte, v any) (int, error) {
	d := json.NewDecoder(bytes.NewReader(p))
	if err := d.Decode(v); err != nil {
		return 0, err
	}
	return int(d.InputOffset()), nil
}

func clip(p []byte) string {
	if len(p) > 40 {
		return string(p[:40]) + "..."
	}
	return string(p)
}

// decodeMQTable decodes {"offsetTable":{MQ:V,...}, other fields...};
// other maps a field name to where to decode it (others are skipped).
func decodeMQTable[V any](body []byte, other map[string]any) (map[MessageQueue]V, error) {
	out := map[MessageQueue]V{}
	p := bytes.TrimSpace(body)
	if len(p) == 0 || p[0] != '{' {
		return nil, fmt.Errorf("remoting: offset table body: want an object: %w", ErrMalformed)
	}
	p = bytes.TrimLeft(p[1:], " \t\r\n")
	for len(p) > 0 && p[0] != '}' {
		var name string
		n, err := decodeOne(p, &name)
		if err != nil {
			return nil, fmt.Errorf("remoting: offset table body: field name: %v: %w", err, ErrMalformed)
		}
		p = bytes.TrimLeft(p[n:], " \t\r\n")
		if len(p) == 0 || p[0] != ':' {
			return nil, fmt.Errorf("remoting: offset table body: want ':' after %q: %w", name, ErrMalformed)
		}
		p = p[1:]
		if name == "offsetTable" {
			p, err = DecodeMQMap(p, func(mq MessageQueue, raw json.RawMessage) error {
				var v V
				if err := json.Unmarshal(raw, &v); err != nil {
					return fmt.Errorf("remoting: offset table %v: %v: %w", mq, err, ErrMalformed)
				}
				out[mq] = v
				return nil
			})
			if err != nil {
				return nil, err
			}
		} else {
			var raw json.RawMessage
			if n, err = decodeOne(p, &raw); err != nil {
				return nil, fmt.Errorf("remoting: offset table body: field %q: %v: %w", name, err, ErrMalformed)
			}
			if dst, ok := other[name]; ok {
				if err := json.Unmarshal(raw, dst); err != nil {
					return nil, fmt.Errorf("remoting: offset table body: field %q: %v: %w", name, err, ErrMalformed)
				}
			}
			p = p[n:]
		}
		p = bytes.TrimLeft(p, " \t\r\n")
		if len(p) > 0 && p[0] == ',' {
			p = bytes.TrimLeft(p[1:], " \t\r\n")
		}
	}
	return out, nil
}
