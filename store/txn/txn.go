// Package txn holds the rules of transactional messages: the record of a
// pending transaction and the entries that end one.
//
// A transactional producer first sends a half message (property TRAN_MSG,
// the prepared bit in its sysFlag). The leader rewrites it, as RocketMQ
// does, to topic RMQ_SYS_TRANS_HALF_TOPIC queue 0 with its real topic and
// queue in REAL_TOPIC and REAL_QID: no consumer reads that topic. Applying
// it records a pending transaction (Record), keyed by the half message's
// queue offset, in the replicated state.
//
// The producer then ends the transaction (END_TRANSACTION), or the leader
// asks it (CHECK_TRANSACTION_STATE) once the transaction is older than the
// timeout. Either way what happens is an entry (Op) applied from the log:
//
//   - Commit carries the real message, rewritten to its topic and queue,
//     and an op message (RMQ_SYS_TRANS_OP_HALF_TOPIC, body the half
//     offset, tag "d") recording the end;
//   - Rollback and Discard (too many checks) carry only the op message;
//   - Check counts one check-back.
//
// An op applies only while its transaction is pending, so a transaction
// ends once: a commit on one leader is never rolled back by the next, a
// late or repeated END_TRANSACTION changes nothing, and a check-back never
// brings back a rolled-back message.
package txn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Topics of transactions.
const (
	HalfTopic = "RMQ_SYS_TRANS_HALF_TOPIC"
	OpTopic   = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
	// OpTag is the tag of op messages ("d": the half message is done).
	OpTag = "d"
)

// Defaults (RocketMQ's BrokerConfig).
const (
	DefaultTimeout       = 6 * time.Second  // transactionTimeOut
	DefaultCheckInterval = 60 * time.Second // transactionCheckInterval
	DefaultCheckMax      = 15               // transactionCheckMax
)

// SysFlag transaction bits (RocketMQ's MessageSysFlag).
const (
	SysFlagTypeMask int32 = 0xC
	SysFlagPrepared int32 = 0x4
	SysFlagCommit   int32 = 0x8
	SysFlagRollback int32 = 0xC
	SysFlagNotType  int32 = 0x0
)

// Record is a pending transaction.
type Record struct {
	Phy         int64 // the half message's commit-log offset
	Size        int32 // its size
	StoreMs     int64 // its store timestamp
	Checks      int32 // check-backs sent
	LastCheckMs int64 // the last check-back (the proposing leader's clock)
	// ImmunityMs is the half message's CHECK_IMMUNITY_TIME_IN_SECONDS, in
	// ms (0 if unset): no check-back before the message is that old.
	ImmunityMs int64
	Group      string // producer group (PGROUP)
}

const recordFixed = 8 + 4 + 8 + 4 + 8 + 8

// Encode returns the record's bytes, as kept in the state database.
//
//	| phy i64 | size u32 | storeMs i64 | checks u32 | lastCheckMs i64 | immunityMs i64 | group bytes |
func (r *Record) Encode() []byte {
	b := make([]byte, 0, recordFixed+len(r.Group))
	b = binary.BigEndian.AppendUint64(b, uint64(r.Phy))
	b = binary.BigEndian.AppendUint32(b, uint32(r.Size))
	b = binary.BigEndian.AppendUint64(b, uint64(r.StoreMs))
	b = binary.BigEndian.AppendUint32(b, uint32(r.Checks))
	b = binary.BigEndian.AppendUint64(b, uint64(r.LastCheckMs))
	b = binary.BigEndian.AppendUint64(b, uint64(r.ImmunityMs))
	return append(b, r.Group...)
}

// ErrCorrupt is returned for a record or op that does not decode.
var ErrCorrupt = errors.New("txn: malformed record")

// DecodeRecord decodes Encode's bytes.
func DecodeRecord(b []byte) (Record, error) {
	if len(b) < recordFixed {
		return Record{}, fmt.Errorf("%w: %d bytes", ErrCorrupt, len(b))
	}
	return Record{
		Phy:         int64(binary.BigEndian.Uint64(b)),
		Size:        int32(binary.BigEndian.Uint32(b[8:])),
		StoreMs:     int64(binary.BigEndian.Uint64(b[12:])),
		Checks:      int32(binary.BigEndian.Uint32(b[20:])),
		LastCheckMs: int64(binary.BigEndian.Uint64(b[24:])),
		ImmunityMs:  int64(binary.BigEndian.Uint64(b[32:])),
		Group:       string(b[recordFixed:]),
	}, nil
}

// Action is what an Op does.
type Action byte

// Actions.
const (
	Commit   Action = 1
	Rollback Action = 2
	Discard  Action = 3 // checked transactionCheckMax times without an answer
	Check    Action = 4
)

func (a Action) String() string {
	switch a {
	case Commit:
		return "commit"
	case Rollback:
		return "rollback"
	case Discard:
		return "discard"
	case Check:
		return "check"
	}
	return fmt.Sprintf("action(%d)", byte(a))
}

// Op is the head of a transaction entry; the records (real message, op
// message) follow it.
type Op struct {
	Action     Action
	HalfOffset int64
	Now        int64 // the proposing leader's clock, ms
}

const opSize = 1 + 8 + 8

// AppendOp appends op's encoding: | action u8 | half offset i64 | now i64 |.
func AppendOp(dst []byte, op *Op) []byte {
	dst = append(dst, byte(op.Action))
	dst = binary.BigEndian.AppendUint64(dst, uint64(op.HalfOffset))
	return binary.BigEndian.AppendUint64(dst, uint64(op.Now))
}

// DecodeOp splits a transaction payload into its head and its records.
func DecodeOp(b []byte) (Op, []byte, error) {
	if len(b) < opSize {
		return Op{}, nil, fmt.Errorf("%w: op of %d bytes", ErrCorrupt, len(b))
	}
	op := Op{Action: Action(b[0]), HalfOffset: int64(binary.BigEndian.Uint64(b[1:])), Now: int64(binary.BigEndian.Uint64(b[9:]))}
	if op.Action < Commit || op.Action > Check || op.HalfOffset < 0 {
		return Op{}, nil, fmt.Errorf("%w: op %v at half offset %d", ErrCorrupt, op.Action, op.HalfOffset)
	}
	return op, b[opSize:], nil
}
