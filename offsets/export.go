package offsets

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/raftmq/raftmq/internal/vfs"
)

// RocketMQ config file names (store/config/ of a RocketMQ broker).
const (
	TopicsFile            = "topics.json"
	ConsumerOffsetFile    = "consumerOffset.json"
	SubscriptionGroupFile = "subscriptionGroup.json"
)

// topicGroupSeparator joins topic and group in consumerOffset.json keys
// (RocketMQ ConsumerOffsetManager.TOPIC_GROUP_SEPARATOR). Valid names
// cannot contain it.
const topicGroupSeparator = "@"

// DataVersion is RocketMQ's DataVersion. Exported files carry timestamp =
// the DB clock in Unix milliseconds and counter = the number of entries in
// the file's table, so exporting equal state at equal times gives equal bytes.
type DataVersion struct {
	StateVersion int64 `json:"stateVersion"`
	Timestamp    int64 `json:"timestamp"`
	Counter      int64 `json:"counter"`
}

// Shapes of the files as written.
type (
	topicsFileOut struct {
		TopicConfigTable map[string]TopicConfig `json:"topicConfigTable"`
		DataVersion      DataVersion            `json:"dataVersion"`
	}
	consumerOffsetFileOut struct {
		OffsetTable map[string]queueOffsetTable `json:"offsetTable"`
		DataVersion DataVersion                 `json:"dataVersion"`
	}
	subscriptionGroupFileOut struct {
		SubscriptionGroupTable map[string]SubscriptionGroupConfig `json:"subscriptionGroupTable"`
		ForbiddenTable         map[string]map[string]int32        `json:"forbiddenTable"`
		DataVersion            DataVersion                        `json:"dataVersion"`
	}
)

// Shapes of the files as read: only the fields raftmq keeps; JSON ignores
// the rest.
type (
	topicsFileIn struct {
		TopicConfigTable map[string]topicConfigJSON `json:"topicConfigTable"`
	}
	consumerOffsetFileIn struct {
		OffsetTable map[string]map[string]int64 `json:"offsetTable"`
	}
	subscriptionGroupFileIn struct {
		SubscriptionGroupTable map[string]subscriptionGroupJSON `json:"subscriptionGroupTable"`
		ForbiddenTable         map[string]json.RawMessage       `json:"forbiddenTable"`
	}
)

// queueOffsetTable is {"<queueId>": offset}, written in numeric queue order.
type queueOffsetTable map[int32]int64

// MarshalJSON writes the queues in numeric order ("2" before "10").
func (q queueOffsetTable) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, id := range slices.Sorted(maps.Keys(q)) {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = strconv.AppendInt(b, int64(id), 10)
		b = append(b, '"', ':')
		b = strconv.AppendInt(b, q[id], 10)
	}
	return append(b, '}'), nil
}

// ExportConfig writes db's topics, consumer offsets and subscription groups
// into dir as RocketMQ's topics.json, consumerOffset.json and
// subscriptionGroup.json. It reads one consistent transaction and replaces
// each file atomically (temp file, fsync, rename, fsync dir).
func ExportConfig(db *DB, dir string) error {
	now := db.now().UnixMilli()
	topics := topicsFileOut{TopicConfigTable: map[string]TopicConfig{}}
	offs := consumerOffsetFileOut{OffsetTable: map[string]queueOffsetTable{}}
	groups := subscriptionGroupFileOut{
		SubscriptionGroupTable: map[string]SubscriptionGroupConfig{},
		ForbiddenTable:         map[string]map[string]int32{},
	}
	err := db.View(func(tx *Tx) error {
		ts, err := tx.Topics()
		if err != nil {
			return err
		}
		for _, c := range ts {
			topics.TopicConfigTable[c.TopicName] = c
		}
		gs, err := tx.SubscriptionGroups()
		if err != nil {
			return err
		}
		for _, c := range gs {
			groups.SubscriptionGroupTable[c.GroupName] = c
		}
		return tx.ForEachConsumerOffset(func(group, topic string, q int32, off int64) error {
			key := topic + topicGroupSeparator + group
			if offs.OffsetTable[key] == nil {
				offs.OffsetTable[key] = queueOffsetTable{}
			}
			offs.OffsetTable[key][q] = off
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("offsets: export config: %w", err)
	}
	topics.DataVersion = DataVersion{Timestamp: now, Counter: int64(len(topics.TopicConfigTable))}
	offs.DataVersion = DataVersion{Timestamp: now, Counter: int64(len(offs.OffsetTable))}
	groups.DataVersion = DataVersion{Timestamp: now, Counter: int64(len(groups.SubscriptionGroupTable))}

	if err := db.fs.MkdirAll(dir, vfs.DirMode); err != nil {
		return fmt.Errorf("offsets: export config: create %s: %w", dir, err)
	}
	for _, f := range []struct {
		name string
		v    any
	}{{TopicsFile, topics}, {ConsumerOffsetFile, offs}, {SubscriptionGroupFile, groups}} {
		data, err := json.MarshalIndent(f.v, "", "\t")
		if err != nil {
			return fmt.Errorf("offsets: export config: encode %s: %w", f.name, err)
		}
		if err := vfs.WriteFileAtomic(db.fs, dir, f.name, append(data, '\n')); err != nil {
			return fmt.Errorf("offsets: export config: write %s: %w", vfs.Join(dir, f.name), err)
		}
	}
	db.log.Info("offsets: exported config", "dir", dir, "topics", len(topics.TopicConfigTable),
		"consumer_offsets", len(offs.OffsetTable), "subscription_groups", len(groups.SubscriptionGroupTable))
	return nil
}

// ImportSummary reports what ImportConfig applied.
type ImportSummary struct {
	Files              []string // the file names read, in the order applied
	Topics             int
	SubscriptionGroups int
	ConsumerOffsets    int // (group, topic, queue) entries
}

type consumerOffsetEntry struct {
	group, topic string
	queueID      int32
	offset       int64
}

// importSet is everything parsed and validated from a config directory.
type importSet struct {
	topics  []TopicConfig
	groups  []SubscriptionGroupConfig
	offsets []consumerOffsetEntry
}

// ImportConfig reads whichever of topics.json, consumerOffset.json and
// subscriptionGroup.json exist in dir (RocketMQ's format; unknown fields are
// ignored), validates all of them, and then writes them into db in one
// transaction, replacing entries of the same name or queue and keeping the
// others. Nothing is written if any file is malformed or invalid; such errors
// name the file and the position or entry, and wrap ErrInvalidConfig.
// The unquoted integer map keys fastjson writes ({0:250}) are accepted;
// ExportConfig writes them quoted, as standard JSON, which fastjson reads.
//
// ImportConfig writes this node's database directly, not through raft.
func ImportConfig(db *DB, dir string) (ImportSummary, error) {
	set, files, err := readConfigDir(db, dir)
	if err != nil {
		return ImportSummary{}, err
	}
	sum := ImportSummary{Files: files}
	err = db.Update(func(tx *Tx) error {
		for _, c := range set.topics {
			if err := tx.PutTopic(c); err != nil {
				return err
			}
		}
		for _, c := range set.groups {
			if err := tx.PutSubscriptionGroup(c); err != nil {
				return err
			}
		}
		for _, o := range set.offsets {
			if err := tx.SetConsumerOffset(o.group, o.topic, o.queueID, o.offset); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return ImportSummary{}, fmt.Errorf("offsets: import config: %w", err)
	}
	sum.Topics, sum.SubscriptionGroups, sum.ConsumerOffsets = len(set.topics), len(set.groups), len(set.offsets)
	db.log.Info("offsets: imported config", "dir", dir, "files", sum.Files, "topics", sum.Topics,
		"subscription_groups", sum.SubscriptionGroups, "consumer_offsets", sum.ConsumerOffsets)
	return sum, nil
}

func parseTopicsFile(_ *DB, data []byte, set *importSet) error {
	var f topicsFileIn
	if err := newJSONDoc(data).unmarshal(&f); err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(f.TopicConfigTable)) {
		c := f.TopicConfigTable[name].config()
		if c.TopicName == "" {
			c.TopicName = name
		}
		if c.TopicName != name {
			return fmt.Errorf("topicConfigTable[%q]: topicName is %q: %w", name, c.TopicName, ErrInvalidConfig)
		}
		if err := c.Validate(); err != nil {
			return fmt.Errorf("topicConfigTable[%q]: %w", name, err)
		}
		set.topics = append(set.topics, c.normalized())
	}
	return nil
}

func parseGroupsFile(db *DB, data []byte, set *importSet) error {
	var f subscriptionGroupFileIn
	if err := newJSONDoc(data).unmarshal(&f); err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(f.SubscriptionGroupTable)) {
		c := f.SubscriptionGroupTable[name].config()
		if c.GroupName == "" {
			c.GroupName = name
		}
		if c.GroupName != name {
			return fmt.Errorf("subscriptionGroupTable[%q]: groupName is %q: %w", name, c.GroupName, ErrInvalidConfig)
		}
		if err := c.Validate(); err != nil {
			return fmt.Errorf("subscriptionGroupTable[%q]: %w", name, err)
		}
		set.groups = append(set.groups, c.normalized())
	}
	if n := len(f.ForbiddenTable); n > 0 {
		db.log.Warn("offsets: import config: forbiddenTable is not supported; ignored",
			"file", SubscriptionGroupFile, "groups", n)
	}
	return nil
}

func parseOffsetsFile(_ *DB, data []byte, set *importSet) error {
	var f consumerOffsetFileIn
	if err := newJSONDoc(data).unmarshal(&f); err != nil {
		return err
	}
	for _, key := range slices.Sorted(maps.Keys(f.OffsetTable)) {
		topic, group, err := splitTopicGroup(key)
		if err != nil {
			return fmt.Errorf("offsetTable[%q]: %w", key, err)
		}
		queues := f.OffsetTable[key]
		for _, qs := range slices.Sorted(maps.Keys(queues)) {
			q, err := strconv.ParseInt(qs, 10, 32)
			if err != nil || q < 0 {
				return fmt.Errorf("offsetTable[%q]: queue id %q is not a non-negative int32: %w", key, qs, ErrInvalidConfig)
			}
			if queues[qs] < 0 {
				return fmt.Errorf("offsetTable[%q][%q]: negative offset %d: %w", key, qs, queues[qs], ErrInvalidConfig)
			}
			set.offsets = append(set.offsets, consumerOffsetEntry{group, topic, int32(q), queues[qs]})
		}
	}
	return nil
}

// splitTopicGroup splits a consumerOffset.json key "<topic>@<group>".
func splitTopicGroup(key string) (topic, group string, err error) {
	if strings.Count(key, topicGroupSeparator) != 1 {
		return "", "", fmt.Errorf("key must be <topic>@<group> with exactly one '@': %w", ErrInvalidConfig)
	}
	topic, group, _ = strings.Cut(key, topicGroupSeparator)
	if err := checkTopicName(topic, ErrInvalidConfig); err != nil {
		return "", "", err
	}
	if err := checkGroupName(group, ErrInvalidConfig); err != nil {
		return "", "", err
	}
	return topic, group, nil
}
