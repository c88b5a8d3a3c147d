package commitlog

import (
	"github.com/raftmq/raftmq/internal/vfs"
)

// Page-cache window.
//
// Every byte appended to a segment lands in a page-cache page first. A
// page the kernel has to find fresh costs far more than one it reuses: on
// the 2-vCPU VMs raftmq is benchmarked on, a buffered write into new pages
// measured 2.7-5.5 µs of CPU per KiB, against 0.2 µs per KiB for
// overwriting cached pages and ~1.6 µs per KiB for a writer that releases
// the pages it no longer needs (`go run` of a 1.5 GiB append loop with an
// fdatasync every 128 KiB). On a message store that cost is paid for every
// byte of every message, on every replica: at 1 KiB messages it was the
// largest single item in a follower's profile.
//
// So, as PostgreSQL does for WAL segments it will not read again, the
// flusher releases the pages of synced bytes once they fall CacheWindow
// behind the durable end of the log: it unmaps them from the segment's
// read mapping (MADV_DONTNEED; pages mapped into a process are not
// droppable) and drops them from the page cache (POSIX_FADV_DONTNEED). The
// kernel then hands those pages to the next writes. Only synced bytes are
// released, so this never starts writeback or changes what a read
// returns; a reader of released bytes (a consumer far behind, a follower
// catching up) reads them from the disk again.
//
// DefaultCacheWindow keeps the newest 1 GiB (about a million 1 KiB
// messages, one default segment) cached, which covers consumers that keep
// up and followers that lag by seconds. A consumer reading further back
// reads from the disk (a full `raftmq bench consume` over several GiB
// measured ~185 k msgs/s that way, against ~250 k from the cache).

const (
	// DefaultCacheWindow is Options.CacheWindow's default: 1 GiB.
	DefaultCacheWindow = 1 << 30
	// DropChunk is the unit the window is released in, 16 MiB: one pair of
	// system calls per 16 MiB appended.
	DropChunk = 16 << 20
)

// releaseCacheLocked releases the page cache of everything more than
// CacheWindow below durableEnd (a global position the log is synced up
// to), in whole DropChunks. The caller holds flushMu, so no segment file
// is closed or unmapped meanwhile. Failures are logged and skipped: this
// is a hint, and the bytes are safe on disk either way.
func (l *Log) releaseCacheLocked(durableEnd int64) {
	w := l.opts.CacheWindow
	if w < 0 {
		return
	}
	limit := durableEnd - w
	limit -= limit % DropChunk
	if limit <= l.released {
		return
	}
	l.mu.RLock()
	segs := make([]*segment, 0, 2)
	for _, s := range l.mu.segs {
		if s.base < limit && s.base+s.size > l.released {
			segs = append(segs, s)
		}
	}
	l.mu.RUnlock()
	for _, s := range segs {
		lo, hi := max(l.released, s.base), min(limit, s.base+s.size)
		if err := vfs.DropCache(s.f, s.m, lo-s.base, hi-lo); err != nil {
			l.log.Debug("commitlog: releasing page cache failed", "segment", s.path, "err", err)
		}
	}
	l.released = limit
}
