package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/raftmq/raftmq/offsets"
	"github.com/raftmq/raftmq/store/schedule"
)

// Entry body kinds.
const (
	KindMessages byte = 1
	KindCommand  byte = 2
	// KindSchedule delivers units of the schedule topic (package
	// schedule): a schedule.Delivery head, then the delivered records.
	KindSchedule byte = 3
	// KindTxn ends or checks a transaction (package txn): a txn.Op head,
	// then its records.
	KindTxn byte = 4
	// KindPop changes pop consumption state (package pop): a pop.Batch
	// head, then the records of messages its revives move to dead-letter
	// topics.
	KindPop byte = 5

	bodyOffKind    = 0
	bodyOffBatchID = 1
	// BodyHeaderSize is the size of the kind and batch id before the payload.
	BodyHeaderSize = 9
)

// Errors a caller sees in results. Apply-time errors are deterministic:
// every replica reaches the same one.
var (
	// ErrUnknownTopic is returned for a message or command naming a topic
	// that does not exist.
	ErrUnknownTopic = errors.New("store: unknown topic")
	// ErrBadQueue is returned for a queue id outside the topic's write queues.
	ErrBadQueue = errors.New("store: queue id out of range")
	// ErrNotWritable is returned for a message to a topic without PERM_WRITE.
	ErrNotWritable = errors.New("store: topic not writable")
	// ErrBadEntry is returned for an entry body that does not decode.
	ErrBadEntry = errors.New("store: malformed entry body")
	// ErrBadCommand is returned for a command that fails validation.
	ErrBadCommand = errors.New("store: invalid command")
	// ErrDiskFull is returned by writers while disk usage is above the
	// full ratio.
	ErrDiskFull = errors.New("store: disk full")
	// ErrNotFound is returned by queries that find nothing.
	ErrNotFound = errors.New("store: not found")
	// ErrScheduleMoved is the result of a schedule delivery entry that does
	// not start at its queue's cursor: another entry delivered those units
	// first. Nothing of it is applied.
	ErrScheduleMoved = errors.New("store: schedule cursor moved")
	// ErrTxnNotPending is the result of a transaction entry for a
	// transaction that is not pending (ended before, or never prepared).
	// Nothing of it is applied.
	ErrTxnNotPending = errors.New("store: transaction not pending")
)

// AppendBodyHeader appends the kind and batch id of an entry body to dst.
func AppendBodyHeader(dst []byte, kind byte, batchID uint64) []byte {
	dst = append(dst, kind)
	return binary.BigEndian.AppendUint64(dst, batchID)
}

// BodyBatchID returns the batch id in an entry body's header, or 0 for a
// body too short to have one.
func BodyBatchID(b []byte) uint64 {
	if len(b) < BodyHeaderSize {
		return 0
	}
	return binary.BigEndian.Uint64(b[bodyOffBatchID:])
}

// Command ops.
const (
	OpCreateTopic = "createTopic" // create or update
	OpDeleteTopic = "deleteTopic"
	OpUpdateGroup = "updateGroup" // create or update
	OpDeleteGroup = "deleteGroup"
	// OpCommitOffsets sets each offset, backwards too (a reset).
	OpCommitOffsets = "commitOffsets"
	// OpAdvanceOffsets moves each offset forward only: a commit below the
	// stored offset leaves it unchanged. Consumer commits use it, so that a
	// stale commit delivered late (a retried request whose first copy sat
	// in a partitioned TCP stream) cannot move a group back.
	OpAdvanceOffsets = "advanceOffsets"
	// OpACL changes the access-control state: ACL is the update, applied
	// by Config.ApplyACL.
	OpACL = "acl"
	// OpImportConfig creates or updates Topics and Groups and sets
	// Offsets (backwards too), all or nothing: a RocketMQ config import
	// (applyImportLocked).
	OpImportConfig = "importConfig"
	// OpBrokerConfig sets the group-wide broker settings in Settings
	// (RocketMQ's names, as brokerPermission); an empty value removes a
	// setting, so the nodes' own configuration holds again. The broker
	// validates names and values before it proposes one.
	OpBrokerConfig = "brokerConfig"
	// OpRecall recalls a scheduled message before it is due (Recall;
	// schedule.Recalled.Apply): schedule.ErrRecallTooLate once it is due.
	OpRecall = "recall"
)

// Command is a replicated change of state other than messages.
type Command struct {
	Op      string                           `json:"op"`
	Topic   *offsets.TopicConfig             `json:"topic,omitempty"`
	Group   *offsets.SubscriptionGroupConfig `json:"group,omitempty"`
	Name    string                           `json:"name,omitempty"`
	Offsets []OffsetCommit                   `json:"offsets,omitempty"`
	ACL     json.RawMessage                  `json:"acl,omitempty"`
	// Topics and Groups are OpImportConfig's.
	Topics []offsets.TopicConfig             `json:"topics,omitempty"`
	Groups []offsets.SubscriptionGroupConfig `json:"groups,omitempty"`
	// Settings are OpBrokerConfig's.
	Settings map[string]string `json:"settings,omitempty"`
	// Recall is OpRecall's.
	Recall *schedule.Recall `json:"recall,omitempty"`
	// Member is OpFormatLevel's.
	Member *MemberLevel `json:"member,omitempty"`
}

// OffsetCommit sets a consumer group's next offset in one queue.
type OffsetCommit struct {
	Group   string `json:"group"`
	Topic   string `json:"topic"`
	QueueID int32  `json:"queueId"`
	Offset  int64  `json:"offset"`
}

// EncodeCommand returns the entry body of a command.
func EncodeCommand(batchID uint64, c *Command) ([]byte, error) {
	js, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("store: encode command: %w", err)
	}
	b := AppendBodyHeader(make([]byte, 0, BodyHeaderSize+len(js)), KindCommand, batchID)
	return append(b, js...), nil
}

// parseBody splits an entry body.
func parseBody(b []byte) (kind byte, batchID uint64, payload []byte, err error) {
	if len(b) < BodyHeaderSize {
		return 0, 0, nil, fmt.Errorf("%w: %d bytes", ErrBadEntry, len(b))
	}
	kind = b[bodyOffKind]
	if kind < KindMessages || kind > KindPop {
		return 0, 0, nil, fmt.Errorf("%w: kind %d", ErrBadEntry, kind)
	}
	return kind, binary.BigEndian.Uint64(b[bodyOffBatchID:]), b[BodyHeaderSize:], nil
}
