package consumequeue

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/raftmq/raftmq/internal/vfs"
)

// DefaultMaxOpenFiles is the number of files a Set keeps open when
// Options.MaxOpenFiles is 0.
const DefaultMaxOpenFiles = 1024

// evictTries is the number of candidates one eviction tries to lock without
// waiting before it waits for a candidate's locks; evictRounds bounds the
// candidates it takes in all.
const (
	evictTries  = 4
	evictRounds = 64
)

// handle is an open file of a segment: its descriptor and its read-only
// mapping. A handle is closed only with both its queue's locks held (q.w and
// q.mu.Lock), so a caller that holds either q.w or q.mu (in any mode) may use
// a handle it obtained under that lock until it releases it.
type handle struct {
	q *Queue
	s *segment
	f vfs.File
	m vfs.Mapping
	// data is m.Bytes(): the file's first s.units units. grow replaces m
	// and data with q.w and q.mu.Lock held.
	data []byte
	// ref is the CLOCK reference bit: set when the file is used, cleared
	// when the eviction hand passes over it.
	ref atomic.Bool
	// slot is the handle's index in fileCache.ring; guarded by
	// fileCache.mu.
	slot int
}

// touch marks h as recently used. It writes the shared bit only when it is
// clear, so a file in constant use costs one atomic load per access.
func (h *handle) touch() {
	if !h.ref.Load() {
		h.ref.Store(true)
	}
}

// raw decodes the i-th unit of the file; i must be below s.units.
func (h *handle) raw(i int64) rawUnit {
	u, _ := decodeUnit(h.data[i*UnitSize:])
	return u
}

// rawOrZero is raw for any i >= 0: units beyond the end of the file read as
// zero (an empty unit), as they would once the file grows.
func (h *handle) rawOrZero(i int64) rawUnit {
	if (i+1)*UnitSize > int64(len(h.data)) {
		return rawUnit{}
	}
	return h.raw(i)
}

func (h *handle) close() error {
	return errors.Join(h.m.Close(), h.f.Close())
}

// fileCache bounds the open files of the queues that share it (a Set's, or
// one Queue opened alone). Files are opened on first use and closed, least
// recently used first, when more than limit are open. The order is CLOCK's
// approximation of LRU: a use sets the handle's reference bit (no lock, no
// write when it is already set), and eviction sweeps a hand over the open
// handles, clearing set bits and taking the first handle whose bit is clear.
// Handles of queues with unsynced writes get a second sweep before they are
// taken, since closing a dirty file syncs it first.
//
// Eviction runs in the goroutine that opened a file past the limit, after it
// released its queue's locks: it holds no queue lock while it takes a
// victim's (q.w, then q.mu), so it cannot deadlock. It first passes over
// queues that are busy (try-lock), and only if several candidates in a row
// are busy does it wait for one. The number of open files can exceed limit
// for a moment, by the files that concurrent callers have opened and not
// yet evicted for (at most the files one call touches, per caller).
type fileCache struct {
	limit int64        // math.MaxInt64 when unbounded
	open  atomic.Int64 // open handles, == len(ring)
	// ownerSyncs (Options.OwnerSyncsFS): closing a dirty file costs no
	// sync, so eviction does not prefer clean ones.
	ownerSyncs bool

	mu   sync.Mutex
	ring []*handle
	hand int
}

func newFileCache(maxOpen int, ownerSyncs bool) *fileCache {
	limit := int64(maxOpen)
	switch {
	case maxOpen == 0:
		limit = DefaultMaxOpenFiles
	case maxOpen < 0:
		limit = math.MaxInt64
	}
	return &fileCache{limit: limit, ownerSyncs: ownerSyncs}
}

// add registers a newly opened handle.
func (c *fileCache) add(h *handle) {
	h.ref.Store(true)
	c.mu.Lock()
	h.slot = len(c.ring)
	c.ring = append(c.ring, h)
	c.mu.Unlock()
	c.open.Add(1)
}

// remove unregisters a handle being closed.
func (c *fileCache) remove(h *handle) {
	c.mu.Lock()
	last := len(c.ring) - 1
	moved := c.ring[last]
	c.ring[h.slot] = moved
	moved.slot = h.slot
	c.ring[last] = nil
	c.ring = c.ring[:last]
	if cap(c.ring) > 64 && len(c.ring) < cap(c.ring)/4 {
		c.ring = append(make([]*handle, 0, cap(c.ring)/2), c.ring...)
	}
	c.mu.Unlock()
	c.open.Add(-1)
}

// maybeEvict closes files while more than limit are open. Callers must hold
// no queue lock: eviction may wait for another queue's.
func (c *fileCache) maybeEvict() {
	if c.open.Load() > c.limit {
		c.evict()
	}
}

func (c *fileCache) evict() {
	for round := 0; round < evictRounds && c.open.Load() > c.limit; round++ {
		h := c.victim()
		if h == nil {
			return
		}
		h.q.evict(h, round >= evictTries)
	}
}

// victim advances the hand to the next handle to close: the first one whose
// reference bit is clear and whose queue has nothing to sync, or else the
// first whose bit is clear.
func (c *fileCache) victim() *handle {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.ring)
	var dirty *handle
	for i := 0; i < 2*n; i++ {
		if dirty != nil && i >= n {
			break
		}
		if c.hand >= len(c.ring) {
			c.hand = 0
		}
		h := c.ring[c.hand]
		c.hand++
		if h.ref.Load() {
			h.ref.Store(false)
			continue
		}
		if !c.ownerSyncs && h.q.needSync.Load() {
			if dirty == nil {
				dirty = h
			}
			continue
		}
		return h
	}
	return dirty
}

// evict closes h if it is still open, taking q's locks, or only trying to
// unless wait is set. It reports whether it closed h. The caller holds no
// queue lock.
func (q *Queue) evict(h *handle, wait bool) bool {
	if wait {
		q.w.Lock()
	} else if !q.w.TryLock() {
		return false
	}
	defer q.w.Unlock()
	if wait {
		q.mu.Lock()
	} else if !q.mu.TryLock() {
		return false
	}
	defer q.mu.Unlock()
	if h.s.h.Load() != h {
		return false // closed meanwhile
	}
	q.evictLocked(h)
	return true
}

// evictLocked closes h. Without OwnerSyncsFS, it syncs the file first if
// it holds unsynced writes (a closed file must never hide that it needs a
// sync); a failed sync is the queue's sticky write error, reported by its
// next write or Sync. With OwnerSyncsFS the file is closed as it is: the
// page cache keeps its writes, the owner's next SyncFS covers them, and
// the segment stays dirty (a Sync syncs it through a descriptor of its
// own). Units held in memory stay there: they need no open file. The
// caller holds q.w and q.mu.Lock.
func (q *Queue) evictLocked(h *handle) {
	s := h.s
	if s.dirty && q.w.err == nil && !q.ownerSyncs {
		if err := h.f.Sync(); err != nil {
			err = fmt.Errorf("sync %s before closing it: %w", q.path(s), err)
			q.warn("consumequeue: sync failed while closing an idle file", "err", err)
			_ = q.fail(err)
		} else {
			s.dirty = false
		}
	}
	if err := q.closeHandle(h); err != nil {
		q.warn("consumequeue: closing an idle file failed", "file", q.path(s), "err", err)
	}
	if len(q.w.pend) == 0 {
		q.w.pend, q.w.spare = nil, nil // an idle queue keeps no write buffer either
	}
}

// closeHandle unregisters and closes h. The caller holds q.w and q.mu.Lock,
// or q.w alone for a segment no reader can reach any more.
func (q *Queue) closeHandle(h *handle) error {
	h.s.h.Store(nil)
	q.cache.remove(h)
	return h.close()
}

// file returns s's open file, opening and mapping it if needed. The caller
// holds q.w or q.mu (either mode); the handle stays open until the caller
// releases that lock.
func (q *Queue) file(s *segment) (*handle, error) {
	if h := s.h.Load(); h != nil {
		h.touch()
		return h, nil
	}
	return q.openFile(s)
}

func (q *Queue) openFile(s *segment) (*handle, error) {
	q.openMu.Lock()
	defer q.openMu.Unlock()
	if h := s.h.Load(); h != nil {
		h.touch()
		return h, nil
	}
	path := q.path(s)
	f, err := q.fs.OpenReadWrite(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	want := s.units * UnitSize
	size, err := f.Size()
	if err == nil && size < want {
		// Mapping past the end would fault on access.
		err = fmt.Errorf("file %s: size %d, want at least %d: %w", path, size, want, ErrCorrupt)
	}
	if err != nil {
		_ = f.Close() // err is the one to report
		return nil, err
	}
	m, err := f.Map(want)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("map %s: %w", path, err)
	}
	if int64(len(m.Bytes())) != want {
		_ = m.Close()
		_ = f.Close()
		return nil, fmt.Errorf("map %s: got %d bytes, want %d", path, len(m.Bytes()), want)
	}
	h := &handle{q: q, s: s, f: f, m: m, data: m.Bytes()}
	q.cache.add(h)
	s.h.Store(h)
	return h, nil
}
