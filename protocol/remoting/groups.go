package remoting

import "encoding/json"

// Consumer-group wire types: queue locks (LOCK_BATCH_MQ 41,
// UNLOCK_BATCH_MQ 42), client registration (UNREGISTER_CLIENT 35) and the
// broker's notice to consumers (NOTIFY_CONSUMER_IDS_CHANGED 40).

// MessageQueue names one queue of a topic on one broker name (RocketMQ's
// MessageQueue).
type MessageQueue struct {
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	QueueID    int32  `json:"queueId"`
}

// LockBatchRequestBody is the body of LOCK_BATCH_MQ and UNLOCK_BATCH_MQ
// (RocketMQ's LockBatchRequestBody and UnlockBatchRequestBody).
type LockBatchRequestBody struct {
	ConsumerGroup  string         `json:"consumerGroup"`
	ClientID       string         `json:"clientId"`
	OnlyThisBroker bool           `json:"onlyThisBroker"`
	MQSet          []MessageQueue `json:"mqSet"`
}

// MarshalJSON writes a nil set as [].
func (b LockBatchRequestBody) MarshalJSON() ([]byte, error) {
	type plain LockBatchRequestBody
	p := plain(b)
	if p.MQSet == nil {
		p.MQSet = []MessageQueue{}
	}
	return json.Marshal(p)
}

// LockBatchResponseBody is the body of a LOCK_BATCH_MQ response: the
// queues the client now holds.
type LockBatchResponseBody struct {
	LockOKMQSet []MessageQueue `json:"lockOKMQSet"`
}

// MarshalJSON writes a nil set as [].
func (b LockBatchResponseBody) MarshalJSON() ([]byte, error) {
	type plain LockBatchResponseBody
	p := plain(b)
	if p.LockOKMQSet == nil {
		p.LockOKMQSet = []MessageQueue{}
	}
	return json.Marshal(p)
}

// UnregisterClientRequestHeader is the header of UNREGISTER_CLIENT (35).
// ClientID is required; a group left empty is not touched.
type UnregisterClientRequestHeader struct {
	ClientID      string // clientID
	ProducerGroup string // producerGroup
	ConsumerGroup string // consumerGroup
}

// Encode returns the ext fields.
func (h *UnregisterClientRequestHeader) Encode() map[string]string {
	w := newExtMap(3)
	w.str("clientID", h.ClientID)
	w.optStr("producerGroup", h.ProducerGroup)
	w.optStr(fieldConsumerGroup, h.ConsumerGroup)
	return w.m
}

// DecodeUnregisterClientRequestHeader decodes an UNREGISTER_CLIENT header.
func DecodeUnregisterClientRequestHeader(ext map[string]string) (UnregisterClientRequestHeader, error) {
	r := extReader{ext: ext}
	h := UnregisterClientRequestHeader{
		ClientID:      r.str("clientID", true),
		ProducerGroup: r.str("producerGroup", false),
		ConsumerGroup: r.str(fieldConsumerGroup, false),
	}
	return h, r.err
}

// NotifyConsumerIDsChangedRequestHeader is the header of the broker's
// one-way NOTIFY_CONSUMER_IDS_CHANGED (40) to a group's consumers.
type NotifyConsumerIDsChangedRequestHeader struct {
	ConsumerGroup string // consumerGroup
}

// Encode returns the ext fields.
func (h *NotifyConsumerIDsChangedRequestHeader) Encode() map[string]string {
	return map[string]string{fieldConsumerGroup: h.ConsumerGroup}
}

// DecodeNotifyConsumerIDsChangedRequestHeader decodes a
// NOTIFY_CONSUMER_IDS_CHANGED header.
func DecodeNotifyConsumerIDsChangedRequestHeader(ext map[string]string) (NotifyConsumerIDsChangedRequestHeader, error) {
	r := extReader{ext: ext}
	h := NotifyConsumerIDsChangedRequestHeader{ConsumerGroup: r.str(fieldConsumerGroup, true)}
	return h, r.err
}

// DecodeLockBatchRequestBody decodes a LOCK_BATCH_MQ or UNLOCK_BATCH_MQ
// body.
func DecodeLockBatchRequestBody(body []byte) (LockBatchRequestBody, error) {
	var b LockBatchRequestBody
	err := DecodeJSON(body, &b)
	return b, err
}

// DecodeLockBatchResponseBody decodes a LOCK_BATCH_MQ response body.
func DecodeLockBatchResponseBody(body []byte) (LockBatchResponseBody, error) {
	var b LockBatchResponseBody
	err := DecodeJSON(body, &b)
	return b, err
}
