package offsets

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/raftmq/raftmq/internal/vfs"
)

// ConfigSet is what a directory of RocketMQ config files holds, parsed and
// validated: the input of a replicated import on a running group.
type ConfigSet struct {
	Files   []string // the file names read
	Topics  []TopicConfig
	Groups  []SubscriptionGroupConfig
	Offsets []ConsumerOffset
}

// ConsumerOffset is one consumer group's offset in one queue.
type ConsumerOffset struct {
	Group   string
	Topic   string
	QueueID int32
	Offset  int64
}

// ReadConfigDir reads and validates whichever of topics.json,
// subscriptionGroup.json and consumerOffset.json exist in dir, as
// ImportConfig does, without writing anything.
func ReadConfigDir(fsys vfs.FS, dir string, log *slog.Logger) (ConfigSet, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	set, files, err := readConfigDir(&DB{log: log, fs: fsys}, dir)
	if err != nil {
		return ConfigSet{}, err
	}
	cs := ConfigSet{Files: files, Topics: set.topics, Groups: set.groups}
	for _, o := range set.offsets {
		cs.Offsets = append(cs.Offsets, ConsumerOffset{Group: o.group, Topic: o.topic, QueueID: o.queueID, Offset: o.offset})
	}
	return cs, nil
}

// readConfigDir parses the config files of dir with db's file system and
// logger.
func readConfigDir(db *DB, dir string) (importSet, []string, error) {
	var set importSet
	var files []string
	parsers := []struct {
		name  string
		parse func(*DB, []byte, *importSet) error
	}{
		{TopicsFile, parseTopicsFile},
		{SubscriptionGroupFile, parseGroupsFile},
		{ConsumerOffsetFile, parseOffsetsFile},
	}
	for _, p := range parsers {
		data, err := vfs.ReadFile(db.fs, vfs.Join(dir, p.name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return importSet{}, nil, fmt.Errorf("offsets: import config: read %s: %w", vfs.Join(dir, p.name), err)
		}
		if len(bytes.TrimSpace(data)) == 0 {
			return importSet{}, nil, fmt.Errorf("offsets: import config: %s: file is empty: %w", p.name, ErrInvalidConfig)
		}
		if err := p.parse(db, data, &set); err != nil {
			return importSet{}, nil, fmt.Errorf("offsets: import config: %s: %w", p.name, err)
		}
		files = append(files, p.name)
	}
	if len(files) == 0 {
		return importSet{}, nil, fmt.Errorf("offsets: import config: none of %s, %s, %s in %s: %w",
			TopicsFile, SubscriptionGroupFile, ConsumerOffsetFile, dir, fs.ErrNotExist)
	}
	return set, files, nil
}
