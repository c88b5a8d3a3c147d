package consumequeue

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/raftmq/raftmq/internal/vfs"
)

// Set manages every queue under one root directory. It is safe for
// concurrent use; each Queue keeps its own one-writer contract. The queues
// share one cache of open files (Options.MaxOpenFiles).
type Set struct {
	fs    vfs.FS
	root  string
	opts  Options
	cache *fileCache

	// create serialises the creation of queues, which does file I/O, so
	// that lookups (mu.RLock) never wait for it.
	create sync.Mutex

	mu struct {
		sync.RWMutex
		queues map[queueKey]*Queue
		closed bool
	}
}

type queueKey struct {
	topic string
	id    int32
}

// OpenSet opens every queue found under root as <root>/<topic>/<queueId>,
// creating root if needed. Entries with other names are ignored.
func OpenSet(fs vfs.FS, root string, opts Options) (*Set, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Set{fs: fs, root: root, opts: opts, cache: newFileCache(opts.MaxOpenFiles, opts.OwnerSyncsFS)}
	s.mu.queues = map[queueKey]*Queue{}
	if err := mkdirDurable(fs, root); err != nil {
		return nil, fmt.Errorf("consumequeue: open set %s: %w", root, err)
	}
	if err := s.discover(); err != nil {
		_ = s.Close() // the discovery error is the one to report
		return nil, err
	}
	return s, nil
}

func (s *Set) discover() error {
	topics, err := s.fs.List(s.root)
	if err != nil {
		return fmt.Errorf("consumequeue: open set: list %s: %w", s.root, err)
	}
	for _, topic := range topics {
		if checkName(topic, 0) != nil || !s.isDir(vfs.Join(s.root, topic)) {
			s.opts.Logger.Debug("consumequeue: ignoring entry", "path", vfs.Join(s.root, topic))
			continue
		}
		ids, err := s.fs.List(vfs.Join(s.root, topic))
		if err != nil {
			return fmt.Errorf("consumequeue: open set: list %s: %w", vfs.Join(s.root, topic), err)
		}
		for _, name := range ids {
			id, ok := parseQueueID(name)
			if !ok || !s.isDir(vfs.Join(s.root, topic, name)) {
				s.opts.Logger.Debug("consumequeue: ignoring entry", "path", vfs.Join(s.root, topic, name))
				continue
			}
			q, err := openQueueIn(s.fs, s.root, topic, id, s.opts, s.cache)
			if err != nil {
				return err
			}
			s.mu.Lock()
			s.mu.queues[queueKey{topic, id}] = q
			s.mu.Unlock()
		}
	}
	return nil
}

func (s *Set) isDir(path string) bool {
	fi, err := s.fs.Stat(path)
	return err == nil && fi.IsDir()
}

// parseQueueID accepts a canonical non-negative decimal int32.
func parseQueueID(name string) (int32, bool) {
	n, err := strconv.ParseInt(name, 10, 32)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != name {
		return 0, false
	}
	return int32(n), true
}

// Queue returns the queue of topic/queueID, creating it if create is set.
// A missing queue with create unset is ErrNoQueue. A lookup is one map
// access under a read lock; it never waits for a queue being created.
func (s *Set) Queue(topic string, queueID int32, create bool) (*Queue, error) {
	q, err := s.lookup(topic, queueID)
	if q != nil || err != nil {
		return q, err
	}
	if !create {
		return nil, fmt.Errorf("consumequeue: queue %s/%d: %w", topic, queueID, ErrNoQueue)
	}
	s.create.Lock()
	defer s.create.Unlock()
	if q, err := s.lookup(topic, queueID); q != nil || err != nil {
		return q, err
	}
	q, err = openQueueIn(s.fs, s.root, topic, queueID, s.opts, s.cache)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	closed := s.mu.closed
	if !closed {
		s.mu.queues[queueKey{topic, queueID}] = q
	}
	s.mu.Unlock()
	if closed {
		_ = q.Close() // the Set closed meanwhile
		return nil, fmt.Errorf("consumequeue: queue %s/%d: %w", topic, queueID, ErrClosed)
	}
	return q, nil
}

// Find returns the queue of topic/queueID, or nil without an error if the
// Set has none (Queue without create returns ErrNoQueue, an allocation a
// caller that polls for queues that may not exist can do without). A
// closed Set is ErrClosed.
func (s *Set) Find(topic string, queueID int32) (*Queue, error) { return s.lookup(topic, queueID) }

// lookup returns the open queue of topic/queueID, nil if there is none, or
// ErrClosed.
func (s *Set) lookup(topic string, queueID int32) (*Queue, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mu.closed {
		return nil, fmt.Errorf("consumequeue: queue %s/%d: %w", topic, queueID, ErrClosed)
	}
	return s.mu.queues[queueKey{topic, queueID}], nil
}

// OpenFiles returns the number of queue files the Set has open (each one
// descriptor and one mapping). It stays at most Options.MaxOpenFiles but for
// the moments described under "Open files" in the package documentation.
func (s *Set) OpenFiles() int { return int(s.cache.open.Load()) }

// Queues returns the open queues sorted by topic, then queue id.
func (s *Set) Queues() []*Queue {
	s.mu.RLock()
	qs := make([]*Queue, 0, len(s.mu.queues))
	for _, q := range s.mu.queues {
		qs = append(qs, q)
	}
	s.mu.RUnlock()
	slices.SortFunc(qs, func(a, b *Queue) int {
		return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.queueID, b.queueID))
	})
	return qs
}

// all returns the open queues in no particular order, or only those that
// need a sync if dirty is set.
func (s *Set) all(dirty bool) []*Queue {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var qs []*Queue
	if !dirty {
		qs = make([]*Queue, 0, len(s.mu.queues))
	}
	for _, q := range s.mu.queues {
		if !dirty || q.needSync.Load() {
			qs = append(qs, q)
		}
	}
	return qs
}

// SyncDirty writes the buffered units of every queue and syncs the queues
// written since they were last synced. Its cost beyond those syncs is one
// pass over the queues; clean queues' files stay closed.
func (s *Set) SyncDirty() error {
	var errs []error
	for _, q := range s.all(true) {
		errs = append(errs, q.Sync())
	}
	return errors.Join(errs...)
}

// WriteBuffered applies Queue.WriteBuffered to every queue with units in
// memory or unsynced writes: it writes the visible units that are only in
// memory to the files, without syncing them.
func (s *Set) WriteBuffered() error {
	var errs []error
	for _, q := range s.all(true) {
		errs = append(errs, q.WriteBuffered())
	}
	return errors.Join(errs...)
}

// DeleteBefore applies Queue.DeleteBefore to every queue and returns the
// number of files removed.
func (s *Set) DeleteBefore(minPhyOffset int64) (int, error) {
	total := 0
	var errs []error
	for _, q := range s.all(false) {
		n, err := q.DeleteBefore(minPhyOffset)
		total += n
		errs = append(errs, err)
	}
	return total, errors.Join(errs...)
}

// TruncatePhy drops, in every queue, the units whose PhyOffset >=
// phyOffset: the commit log was truncated there.
func (s *Set) TruncatePhy(phyOffset int64) error {
	var errs []error
	for _, q := range s.all(false) {
		errs = append(errs, q.TruncatePhy(phyOffset))
	}
	return errors.Join(errs...)
}

// Close closes every queue. Closing a closed Set is a no-op.
func (s *Set) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.closed = true
	s.mu.Unlock()
	var errs []error
	for _, q := range s.all(false) {
		errs = append(errs, q.Close())
	}
	return errors.Join(errs...)
}
