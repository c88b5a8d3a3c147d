package consumequeue

// SyncMark records how far one dirty queue was written when
// Set.MarkDirty ran.
type SyncMark struct {
	q      *Queue
	writes uint64
}

// MarkDirty and SyncedByFS are for an owner that makes the whole file
// system durable itself (vfs.FS.SyncFS) instead of syncing queue by queue:
//
//	marks, err := set.MarkDirty()  // writes every buffered unit
//	err = fs.SyncFS(dir)           // covers every write made before it
//	set.SyncedByFS(marks)          // those queues need no Sync of their own
//
// MarkDirty writes the buffered units of every dirty queue and returns a
// mark for each. Its cost is one pass over the open queues, without a
// syscall for a queue that has nothing buffered.
func (s *Set) MarkDirty() ([]SyncMark, error) {
	dirty := s.all(true)
	marks := make([]SyncMark, 0, len(dirty))
	for _, q := range dirty {
		w, err := q.flushForMark()
		s.cache.maybeEvict()
		if err != nil {
			return nil, err
		}
		marks = append(marks, SyncMark{q, w})
	}
	return marks, nil
}

func (q *Queue) flushForMark() (uint64, error) {
	q.w.Lock()
	defer q.w.Unlock()
	if q.mu.closed {
		return q.writes.Load(), nil
	}
	if q.w.err != nil {
		return 0, q.w.err
	}
	if err := q.flushLocked(); err != nil {
		return 0, err
	}
	return q.writes.Load(), nil
}

// SyncedByFS records that the file system was synced after MarkDirty
// returned marks: a queue not written since its mark is clean, so neither
// its next file roll nor Close syncs it again. A queue written since stays
// dirty (its later writes may have missed the sync).
func (s *Set) SyncedByFS(marks []SyncMark) {
	for _, m := range marks {
		m.q.syncedByFS(m.writes)
	}
}

func (q *Queue) syncedByFS(writes uint64) {
	q.w.Lock()
	defer q.w.Unlock()
	if q.mu.closed || q.w.err != nil || q.writes.Load() != writes || len(q.w.pend) > 0 {
		return
	}
	for _, s := range q.mu.segs {
		s.dirty = false
	}
	q.needSync.Store(false)
}
