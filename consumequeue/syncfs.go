package consumequeue

// SyncMark records how far one dirty queue was written when
// Set.MarkDirty ran.
type SyncMark struct {
	q        *Queue
	writes   uint64
	firstGen uint64
}

// MarkDirty and SyncedByFS are for an owner that makes the whole file
// system durable itself (vfs.FS.SyncFS) instead of syncing queue by queue
// (see Options.OwnerSyncsFS for what that buys and what it asks):
//
//	marks, err := set.MarkDirty()  // writes every buffered unit
//	err = fs.SyncFS(dir)           // covers every write made before it
//	set.SyncedByFS(marks)          // those queues need no Sync of their own
//
// MarkDirty writes the units every dirty queue holds in memory (whether
// Flush made them visible or not, and makes them visible) and returns a
// mark for each queue. Its cost is one pass over the open queues, without a
// syscall for a queue that has nothing in memory.
func (s *Set) MarkDirty() ([]SyncMark, error) { return s.mark(false) }

// MarkFlushed is MarkDirty for an owner that runs it beside its writer: it
// writes only the units that Flush made visible, and leaves the units put
// since the last Flush buffered and invisible (a later MarkDirty or
// MarkFlushed writes them). Its marks cover every unit flushed before it
// began, and the writer waits for it only one queue at a time.
func (s *Set) MarkFlushed() ([]SyncMark, error) { return s.mark(true) }

func (s *Set) mark(flushedOnly bool) ([]SyncMark, error) {
	dirty := s.all(true)
	marks := make([]SyncMark, 0, len(dirty))
	for _, q := range dirty {
		m, err := q.flushForMark(flushedOnly)
		s.cache.maybeEvict()
		if err != nil {
			return nil, err
		}
		marks = append(marks, m)
	}
	return marks, nil
}

func (q *Queue) flushForMark(flushedOnly bool) (SyncMark, error) {
	q.w.Lock()
	defer q.w.Unlock()
	if q.mu.closed {
		return SyncMark{q: q, writes: q.writes.Load(), firstGen: q.w.firstGen}, nil
	}
	if q.w.err != nil {
		return SyncMark{}, q.w.err
	}
	upTo := q.endLocked()
	if flushedOnly {
		upTo = q.mu.max
	}
	if err := q.spillLocked(upTo); err != nil {
		return SyncMark{}, err
	}
	return SyncMark{q: q, writes: q.writes.Load(), firstGen: q.w.firstGen}, nil
}

// SyncedByFS records that the file system was synced after MarkDirty
// returned marks: a queue's files not written since its mark are clean, so
// neither its next file roll nor Close syncs them again, and the queue is
// clean unless it holds units put since. A queue whose files were written
// since stays dirty (its later writes may have missed the sync).
func (s *Set) SyncedByFS(marks []SyncMark) {
	for _, m := range marks {
		m.q.syncedByFS(m)
	}
}

func (q *Queue) syncedByFS(m SyncMark) {
	q.w.Lock()
	defer q.w.Unlock()
	if q.mu.closed || q.w.err != nil {
		return
	}
	if q.w.firstGen == m.firstGen {
		// The first file, if the queue had one at the mark, existed when
		// the sync began.
		q.w.firstSynced = true
	}
	if q.writes.Load() != m.writes {
		return
	}
	for _, s := range q.mu.segs {
		s.dirty = false
	}
	if len(q.w.pend) == 0 {
		q.needSync.Store(false)
	}
}
