package commitlog

import "sort"

// The tail cache.
//
// Entries just appended are read back at once: raft asks Storage.Entries
// for the committed ones (a follower learns of the commit after it has
// persisted them), and the store reads them again to apply them. Served
// from the mapped segments, each read faults the fresh page-cache pages
// into the mapping and copies every body into a new allocation. The tail
// cache keeps the encoding buffers of the most recent appends instead
// (Options.TailCache bytes of them), and Entries returns bodies that alias
// them.
//
// A chunk is the buffer of one WriteAt: the entries exactly as written to
// the segment, never changed afterwards (a new buffer is allocated for
// every append while the cache is on), so a body handed out stays valid
// and unchanged for as long as its holder keeps it, whatever happens to
// the log or the cache later. The chunks hold consecutive indexes, oldest
// first. TruncateSuffix trims them with the log, Reset empties them and
// DropPrefix drops those below the new first index, all under Log.mu.

// DefaultTailCache is Options.TailCache's default: 32 MiB.
const DefaultTailCache = 32 << 20

// tailChunk is the buffer of one write.
type tailChunk struct {
	first uint64   // index of its first entry
	pos   int64    // global position of its first entry
	buf   []byte   // the encoded entries
	offs  []uint32 // offs[i]: offset in buf of entry first+i
}

func (c *tailChunk) last() uint64 { return c.first + uint64(len(c.offs)) - 1 }

// tailAddLocked records the chunk just written and evicts the oldest
// chunks beyond the budget (the newest always stays). Caller holds mu.
func (l *Log) tailAddLocked(c tailChunk) {
	l.mu.tail = append(l.mu.tail, c)
	l.mu.tailBytes += len(c.buf)
	n, left := 0, l.mu.tailBytes
	for n < len(l.mu.tail)-1 && left > int(l.opts.TailCache) {
		left -= len(l.mu.tail[n].buf)
		n++
	}
	l.tailDropFrontLocked(n)
}

// tailDropFrontLocked drops the n oldest chunks. Caller holds mu.
func (l *Log) tailDropFrontLocked(n int) {
	for _, c := range l.mu.tail[:n] {
		l.mu.tailBytes -= len(c.buf)
	}
	// Reslice rather than shift: with small entries the cache holds tens of
	// thousands of chunks, and moving them all on every append cost a
	// follower 13 % of its CPU under pop traffic. The vacated slots are
	// zeroed so that no buffer stays referenced; append reallocates once the
	// capacity left behind the front runs out, which keeps it amortised O(1).
	clear(l.mu.tail[:n])
	l.mu.tail = l.mu.tail[n:]
}

// tailEntryLocked returns the encoded entry i (header and body, possibly
// followed by more entries) and its global position, if the cache has it.
// Caller holds mu (read or write).
func (l *Log) tailEntryLocked(i uint64) ([]byte, int64, bool) {
	t := l.mu.tail
	if len(t) == 0 || i < t[0].first || i > t[len(t)-1].last() {
		return nil, 0, false
	}
	k := len(t) - 1
	if i < t[k].first {
		k = sort.Search(len(t), func(k int) bool { return t[k].last() >= i })
	}
	c := &t[k]
	off := c.offs[i-c.first]
	return c.buf[off:], c.pos + int64(off), true
}

// tailTruncateLocked drops cached entries from index from on. Caller holds
// mu.
func (l *Log) tailTruncateLocked(from uint64) {
	for n := len(l.mu.tail); n > 0; n-- {
		c := &l.mu.tail[n-1]
		if c.first < from {
			if from <= c.last() {
				cut := c.offs[from-c.first]
				l.mu.tailBytes -= len(c.buf) - int(cut)
				c.buf, c.offs = c.buf[:cut:cut], c.offs[:from-c.first:from-c.first]
			}
			return
		}
		l.mu.tailBytes -= len(c.buf)
		l.mu.tail[n-1] = tailChunk{}
		l.mu.tail = l.mu.tail[:n-1]
	}
}

// tailDropBelowLocked drops chunks wholly below index first. Caller holds
// mu.
func (l *Log) tailDropBelowLocked(first uint64) {
	n := 0
	for n < len(l.mu.tail) && l.mu.tail[n].last() < first {
		n++
	}
	l.tailDropFrontLocked(n)
}

// tailResetLocked empties the cache. Caller holds mu.
func (l *Log) tailResetLocked() {
	clear(l.mu.tail)
	l.mu.tail, l.mu.tailBytes = l.mu.tail[:0], 0
}

// tailReadLocked copies len(p) bytes at global position pos into p if one
// cached chunk holds them all, and reports whether it did. Caller holds mu.
func (l *Log) tailReadLocked(p []byte, pos int64) bool {
	t := l.mu.tail
	if len(t) == 0 || pos < t[0].pos {
		return false
	}
	k := sort.Search(len(t), func(k int) bool { return t[k].pos > pos }) - 1
	c := &t[k]
	off := pos - c.pos
	if off+int64(len(p)) > int64(len(c.buf)) {
		return false
	}
	copy(p, c.buf[off:])
	return true
}
