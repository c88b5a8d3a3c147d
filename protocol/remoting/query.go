package remoting

// Message queries: QUERY_MESSAGE (12) by key or UNIQ_KEY within a time
// range, VIEW_MESSAGE_BY_ID (33) by commit-log offset. Both answer with
// messages in the stored format, concatenated.

// UniqueKeyQueryField is the ext field that marks a QUERY_MESSAGE key as a
// UNIQ_KEY (RocketMQ's MixAll.UNIQUE_MSG_QUERY_FLAG).
const UniqueKeyQueryField = "_UNIQUE_KEY_QUERY"

// QueryMessageRequestHeader is the header of QUERY_MESSAGE. All fields are
// required; UniqueKey travels as the ext field UniqueKeyQueryField.
type QueryMessageRequestHeader struct {
	Topic          string // topic
	Key            string // key
	MaxNum         int32  // maxNum
	BeginTimestamp int64  // beginTimestamp, ms
	EndTimestamp   int64  // endTimestamp, ms
	UniqueKey      bool
}

// Encode returns the ext fields.
func (h *QueryMessageRequestHeader) Encode() map[string]string {
	w := newExtMap(6)
	w.str(fieldTopic, h.Topic)
	w.str("key", h.Key)
	w.i32("maxNum", h.MaxNum)
	w.i64("beginTimestamp", h.BeginTimestamp)
	w.i64("endTimestamp", h.EndTimestamp)
	w.optBool(UniqueKeyQueryField, h.UniqueKey)
	return w.m
}

// DecodeQueryMessageRequestHeader decodes a QUERY_MESSAGE header.
func DecodeQueryMessageRequestHeader(ext map[string]string) (QueryMessageRequestHeader, error) {
	r := extReader{ext: ext}
	h := QueryMessageRequestHeader{
		Topic:          r.str(fieldTopic, true),
		Key:            r.str("key", true),
		MaxNum:         r.i32("maxNum", true),
		BeginTimestamp: r.i64("beginTimestamp", true),
		EndTimestamp:   r.i64("endTimestamp", true),
		UniqueKey:      r.boolean(UniqueKeyQueryField, false),
	}
	return h, r.err
}

// QueryMessageResponseHeader is the header of a QUERY_MESSAGE answer.
type QueryMessageResponseHeader struct {
	IndexLastUpdateTimestamp int64 // indexLastUpdateTimestamp
	IndexLastUpdatePhyoffset int64 // indexLastUpdatePhyoffset
}

// Encode returns the ext fields.
func (h *QueryMessageResponseHeader) Encode() map[string]string {
	w := newExtMap(2)
	w.i64("indexLastUpdateTimestamp", h.IndexLastUpdateTimestamp)
	w.i64("indexLastUpdatePhyoffset", h.IndexLastUpdatePhyoffset)
	return w.m
}

// ViewMessageRequestHeader is the header of VIEW_MESSAGE_BY_ID: the
// message's commit-log offset (required) and, optionally, its topic.
type ViewMessageRequestHeader struct {
	Offset int64  // offset
	Topic  string // topic
}

// Encode returns the ext fields.
func (h *ViewMessageRequestHeader) Encode() map[string]string {
	w := newExtMap(2)
	w.i64(fieldOffset, h.Offset)
	w.optStr(fieldTopic, h.Topic)
	return w.m
}

// DecodeViewMessageRequestHeader decodes a VIEW_MESSAGE_BY_ID header.
func DecodeViewMessageRequestHeader(ext map[string]string) (ViewMessageRequestHeader, error) {
	r := extReader{ext: ext}
	h := ViewMessageRequestHeader{Offset: r.i64(fieldOffset, true), Topic: r.str(fieldTopic, false)}
	return h, r.err
}
