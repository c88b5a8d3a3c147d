package remoting

// Transaction headers: END_TRANSACTION (37), which a producer sends after
// its local transaction and in answer to a check, and the broker's
// CHECK_TRANSACTION_STATE (39) to a producer.

// commitOrRollback values of END_TRANSACTION (RocketMQ's MessageSysFlag
// transaction types).
const (
	// TransactionNotType: the producer does not know yet; the broker
	// changes nothing and checks back later. Apache sends no answer.
	TransactionNotType int32 = 0
	// TransactionCommitType: store the half message in its real topic.
	TransactionCommitType int32 = 8
	// TransactionRollbackType: discard the half message.
	TransactionRollbackType int32 = 12
)

// EndTransactionRequestHeader is the header of END_TRANSACTION (37).
// Required: ProducerGroup, TranStateTableOffset, CommitLogOffset,
// CommitOrRollback, MsgID. FromTransactionCheck is always written, as
// Java's non-null default.
type EndTransactionRequestHeader struct {
	ProducerGroup string // producerGroup
	// TranStateTableOffset (tranStateTableOffset) is the half message's
	// queue offset: the send response's queueOffset.
	TranStateTableOffset int64
	// CommitLogOffset (commitLogOffset) is the half message's commit log
	// offset, decoded from the send response's msgId (offsetMsgId).
	CommitLogOffset int64
	// CommitOrRollback (commitOrRollback) is TransactionNotType,
	// TransactionCommitType or TransactionRollbackType.
	CommitOrRollback int32
	// FromTransactionCheck (fromTransactionCheck) marks the answer to a
	// CHECK_TRANSACTION_STATE.
	FromTransactionCheck bool
	MsgID                string // msgId: the half message's UNIQ_KEY
	TransactionID        string // transactionId; optional
	Topic                string // topic: the real topic; optional (5.x)
}

// Encode returns the ext fields.
func (h *EndTransactionRequestHeader) Encode() map[string]string {
	w := newExtMap(8)
	w.str("producerGroup", h.ProducerGroup)
	w.i64("tranStateTableOffset", h.TranStateTableOffset)
	w.i64("commitLogOffset", h.CommitLogOffset)
	w.i32("commitOrRollback", h.CommitOrRollback)
	w.boolean("fromTransactionCheck", h.FromTransactionCheck)
	w.str("msgId", h.MsgID)
	w.optStr("transactionId", h.TransactionID)
	w.optStr(fieldTopic, h.Topic)
	return w.m
}

// DecodeEndTransactionRequestHeader decodes an END_TRANSACTION header.
func DecodeEndTransactionRequestHeader(ext map[string]string) (EndTransactionRequestHeader, error) {
	r := extReader{ext: ext}
	h := EndTransactionRequestHeader{
		ProducerGroup:        r.str("producerGroup", true),
		TranStateTableOffset: r.i64("tranStateTableOffset", true),
		CommitLogOffset:      r.i64("commitLogOffset", true),
		CommitOrRollback:     r.i32("commitOrRollback", true),
		FromTransactionCheck: r.boolean("fromTransactionCheck", false),
		MsgID:                r.str("msgId", true),
		TransactionID:        r.str("transactionId", false),
		Topic:                r.str(fieldTopic, false),
	}
	return h, r.err
}

// CheckTransactionStateRequestHeader is the header of the broker's
// CHECK_TRANSACTION_STATE (39) to a producer; the body is the half message
// in the stored format, with its real topic and queue. Required:
// TranStateTableOffset, CommitLogOffset.
type CheckTransactionStateRequestHeader struct {
	Topic                string // topic: the real topic
	TranStateTableOffset int64  // tranStateTableOffset: half queue offset
	CommitLogOffset      int64  // commitLogOffset: half message's offset
	MsgID                string // msgId: UNIQ_KEY
	TransactionID        string // transactionId: UNIQ_KEY
	OffsetMsgID          string // offsetMsgId: the half message's
}

// Encode returns the ext fields.
func (h *CheckTransactionStateRequestHeader) Encode() map[string]string {
	w := newExtMap(6)
	w.optStr(fieldTopic, h.Topic)
	w.i64("tranStateTableOffset", h.TranStateTableOffset)
	w.i64("commitLogOffset", h.CommitLogOffset)
	w.optStr("msgId", h.MsgID)
	w.optStr("transactionId", h.TransactionID)
	w.optStr("offsetMsgId", h.OffsetMsgID)
	return w.m
}

// DecodeCheckTransactionStateRequestHeader decodes a
// CHECK_TRANSACTION_STATE header.
func DecodeCheckTransactionStateRequestHeader(ext map[string]string) (CheckTransactionStateRequestHeader, error) {
	r := extReader{ext: ext}
	h := CheckTransactionStateRequestHeader{
		Topic:                r.str(fieldTopic, false),
		TranStateTableOffset: r.i64("tranStateTableOffset", true),
		CommitLogOffset:      r.i64("commitLogOffset", true),
		MsgID:                r.str("msgId", false),
		TransactionID:        r.str("transactionId", false),
		OffsetMsgID:          r.str("offsetMsgId", false),
	}
	return h, r.err
}
