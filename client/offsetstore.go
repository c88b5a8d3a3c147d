package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sync"

	"github.com/raftmq/raftmq/internal/vfs"
)

// offsetStore keeps a push consumer's consumed offsets ("the next offset
// to consume" of each queue): in memory while queues are consumed, and
// persisted on demand. The broker keeps a clustering group's offsets; a
// broadcasting consumer keeps its own in a local file. Safe for concurrent
// use.
type offsetStore interface {
	// read returns mq's offset: the in-memory one if the store keeps
	// offsets of queues it no longer consumes (the local file store),
	// else the persisted one. false: none stored.
	read(ctx context.Context, mq MessageQueue) (int64, bool, error)
	// update sets mq's in-memory offset.
	update(mq MessageQueue, offset int64)
	// persist writes the in-memory offsets of mqs (of every queue if mqs
	// is nil) that changed since they were last written.
	persist(ctx context.Context, mqs []MessageQueue) error
	// forget drops mq's in-memory offset once it is persisted, so that a
	// later read does not see it if the store reads from elsewhere.
	forget(mq MessageQueue)
}

var (
	_ offsetStore = (*brokerOffsetStore)(nil)
	_ offsetStore = (*fileOffsetStore)(nil)
)

// offsetEntry is one queue's in-memory offset.
type offsetEntry struct {
	offset int64
	// dirty is set by update and cleared when offset was persisted.
	dirty bool
}

// offsetTable is the in-memory part of both stores.
type offsetTable struct {
	mu sync.Mutex
	m  map[MessageQueue]offsetEntry // guarded by mu
}

func (t *offsetTable) update(mq MessageQueue, offset int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.m[mq]; ok && e.offset == offset {
		return
	}
	t.m[mq] = offsetEntry{offset: offset, dirty: true}
}

func (t *offsetTable) get(mq MessageQueue) (int64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.m[mq]
	return e.offset, ok
}

// dirty returns the changed entries among mqs (all if nil).
func (t *offsetTable) dirty(mqs []MessageQueue) map[MessageQueue]int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[MessageQueue]int64{}
	for mq, e := range t.m {
		if e.dirty && (mqs == nil || slices.Contains(mqs, mq)) {
			out[mq] = e.offset
		}
	}
	return out
}

// persisted clears the dirty mark of mq if its offset is still offset.
func (t *offsetTable) persisted(mq MessageQueue, offset int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.m[mq]; ok && e.offset == offset {
		t.m[mq] = offsetEntry{offset: offset}
	}
}

// brokerOffsetStore keeps a clustering group's offsets on the broker:
// QUERY_CONSUMER_OFFSET reads, UPDATE_CONSUMER_OFFSET persists (and the
// pull requests carry the in-memory offset too, see queueWorker.pull).
type brokerOffsetStore struct {
	pc    *PullConsumer
	table offsetTable
	// persistMu makes persists one at a time, so an older snapshot can
	// never be written after a newer one.
	persistMu sync.Mutex
}

func newBrokerOffsetStore(pc *PullConsumer) *brokerOffsetStore {
	s := &brokerOffsetStore{pc: pc}
	s.table.m = map[MessageQueue]offsetEntry{}
	return s
}

func (s *brokerOffsetStore) read(ctx context.Context, mq MessageQueue) (int64, bool, error) {
	return s.pc.fetchOffset(ctx, mq.Topic, mq.QueueID, false)
}

func (s *brokerOffsetStore) update(mq MessageQueue, offset int64) { s.table.update(mq, offset) }

func (s *brokerOffsetStore) persist(ctx context.Context, mqs []MessageQueue) error {
	s.persistMu.Lock()
	defer s.persistMu.Unlock()
	var errs []error
	for mq, off := range s.table.dirty(mqs) {
		if err := s.pc.CommitOffset(ctx, mq.Topic, mq.QueueID, off); err != nil {
			errs = append(errs, err)
			continue
		}
		s.table.persisted(mq, off)
	}
	return errors.Join(errs...)
}

func (s *brokerOffsetStore) forget(mq MessageQueue) {
	s.table.mu.Lock()
	defer s.table.mu.Unlock()
	delete(s.table.m, mq)
}

// fileOffsetStore keeps a broadcasting consumer's offsets in a local JSON
// file, the only copy: entries are never forgotten. The file is replaced
// atomically: written to <path>.tmp, fsynced, renamed over path, and the
// directory fsynced, so a crash leaves the old file or the new one. Its
// content:
//
//	{"version":1,"group":"G",
//	 "offsets":[{"topic":"T","brokerName":"b","queueId":0,"offset":42},...]}
//
// with offsets sorted by queue; "offset" is the next offset to consume.
type fileOffsetStore struct {
	fs    vfs.FS
	path  string
	group string
	table offsetTable
	// persistMu serializes file writes (the temp file has one name).
	persistMu sync.Mutex
}

// offsetFileVersion is the version field of the offset file.
const offsetFileVersion = 1

type offsetFile struct {
	Version int               `json:"version"`
	Group   string            `json:"group"`
	Offsets []offsetFileEntry `json:"offsets"`
}

type offsetFileEntry struct {
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	QueueID    int32  `json:"queueId"`
	Offset     int64  `json:"offset"`
}

// openFileOffsetStore loads path if it exists.
func openFileOffsetStore(fsys vfs.FS, path, group string) (*fileOffsetStore, error) {
	s := &fileOffsetStore{fs: fsys, path: path, group: group}
	s.table.m = map[MessageQueue]offsetEntry{}
	b, err := readFile(fsys, path)
	if errors.Is(err, vfs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("client: offset file %s: %w", path, err)
	}
	var f offsetFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("client: offset file %s: %w", path, err)
	}
	if f.Version != offsetFileVersion {
		return nil, fmt.Errorf("client: offset file %s: version %d, want %d", path, f.Version, offsetFileVersion)
	}
	if f.Group != group {
		return nil, fmt.Errorf("client: offset file %s belongs to group %q, not %q", path, f.Group, group)
	}
	for _, e := range f.Offsets {
		s.table.m[MessageQueue{Topic: e.Topic, BrokerName: e.BrokerName, QueueID: e.QueueID}] = offsetEntry{offset: e.Offset}
	}
	return s, nil
}

// readFile reads a whole file through fsys.
func readFile(fsys vfs.FS, path string) ([]byte, error) {
	fi, err := fsys.Stat(path)
	if err != nil {
		return nil, err
	}
	f, err := fsys.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, fi.Size())
	if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b, nil
}

func (s *fileOffsetStore) read(_ context.Context, mq MessageQueue) (int64, bool, error) {
	off, ok := s.table.get(mq)
	return off, ok, nil
}

func (s *fileOffsetStore) update(mq MessageQueue, offset int64) { s.table.update(mq, offset) }

func (s *fileOffsetStore) forget(MessageQueue) {}

// persist rewrites the file if any offset changed; the file always holds
// every queue's offset, so mqs only decides whether to write.
func (s *fileOffsetStore) persist(_ context.Context, mqs []MessageQueue) error {
	s.persistMu.Lock()
	defer s.persistMu.Unlock()
	if len(s.table.dirty(mqs)) == 0 {
		return nil
	}
	s.table.mu.Lock()
	snap := make(map[MessageQueue]int64, len(s.table.m))
	for mq, e := range s.table.m {
		snap[mq] = e.offset
	}
	s.table.mu.Unlock()
	f := offsetFile{Version: offsetFileVersion, Group: s.group, Offsets: make([]offsetFileEntry, 0, len(snap))}
	for mq, off := range snap {
		f.Offsets = append(f.Offsets, offsetFileEntry{Topic: mq.Topic, BrokerName: mq.BrokerName, QueueID: mq.QueueID, Offset: off})
	}
	slices.SortFunc(f.Offsets, func(a, b offsetFileEntry) int {
		return CompareQueues(MessageQueue{a.Topic, a.BrokerName, a.QueueID}, MessageQueue{b.Topic, b.BrokerName, b.QueueID})
	})
	b, err := json.Marshal(&f)
	if err != nil {
		return fmt.Errorf("client: offset file %s: %w", s.path, err)
	}
	if err := writeFileAtomic(s.fs, s.path, b); err != nil {
		return fmt.Errorf("client: offset file %s: %w", s.path, err)
	}
	for mq, off := range snap {
		s.table.persisted(mq, off)
	}
	return nil
}

// writeFileAtomic replaces path with b: temp file, fsync, rename, fsync of
// the directory.
func writeFileAtomic(fsys vfs.FS, path string, b []byte) error {
	dir := filepath.Dir(path)
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := fsys.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(b, 0)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, path)
	}
	if err != nil {
		_ = fsys.Remove(tmp) // the error that matters is err
		return err
	}
	return fsys.SyncDir(dir)
}
