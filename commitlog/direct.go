package commitlog

import (
	"errors"
	"fmt"

	"github.com/raftmq/raftmq/internal/vfs"
)

// Direct appends.
//
// A buffered write lands in page-cache pages, and on the VMs raftmq is
// measured on a page the kernel must find fresh costs 2-5 µs of CPU per
// KiB (cache.go): a leader profile at ~70 k msgs/s put a third of its CPU
// in the commitlog's pwrite, and followers a quarter to a half. Yet the log
// never reads those pages back while they are fresh: the tail cache
// (tail.go) serves recent entries from the buffers they were written from.
// So with Options.DirectIO the log writes appends with direct I/O
// (O_DIRECT): the device reads them from our buffer, and no page-cache page
// is allocated for them.
//
// Direct I/O moves whole blocks only (vfs.DirectAlign, 4 KiB: offset,
// length and buffer address). An append of bytes p at position end of a
// segment therefore writes the file's range
//
//	[alignDown(end), alignUp(end+len(p)))
//
// from an aligned buffer holding, in order: the bytes already in the file
// before end in that first block (segment.blk, kept in memory), p, and
// zeros up to the block boundary. The first part rewrites bytes with the
// values they have; the zeros go where the file reads as zero anyway (the
// segment is preallocated, and the warm-up writes zeros only from
// alignUp(end) on, see warm.go), so the file's content after the write is
// what a buffered write of p would have made it, whatever part of the
// write a crash tears. Recovery and the on-disk format are unaffected.
//
// segment.blk is loaded from the file (a buffered read, coherent with
// direct writes) before the first direct append to a segment and after
// anything that rewrites its tail other than an append (TruncateSuffix
// zeroes from the cut, which clears blkOK). The segment header, the seal
// and recovery's repairs are written through the buffered handle, as
// before; they never race a direct write (the log has one writer, and
// the kernel writes back and drops the cached pages of a range before
// a direct write to it).
//
// Reads: Entries, Term, ReadAt and ReadMany look in the tail cache first,
// and only older bytes are read through the segment mappings, which fault
// them in from the disk (or the page cache, if something read them since).
// A mapped page of the block being rewritten is dropped by the kernel, so
// a mapping never shows stale bytes.
//
// When the file system has no direct I/O (MemFS in tests, tmpfs), the same
// block writes go through the buffered handle: the file's content is the
// same, only the page cache is used.
//
// Measured, and why it is off by default: on the 2-vCPU VM of the
// benchmarks, a three-node group with direct appends took the commitlog's
// pwrite from ~40 % of a leader's profile to ~11 %, yet throughput did not
// move (pipelined, auto-batched: 58-67 k msgs/s against 66-71 k buffered,
// batches of 32: 78-84 against 78-88 MB/s, one send at a time p50
// 0.85-0.95 ms either way; alternating fresh groups). The CPU per message
// of each process stayed where it was: the cost of touching fresh memory
// moved into copies and the kernel's block layer, and the warm-up (which
// direct appends need, or their fdatasync commits block allocations)
// doubles the bytes written. Consumers reading further back than the tail
// cache also read from the disk. It stays an option (--direct-io 1) for
// machines where the page cache is the bottleneck.

// directAppendKeep is the largest aligned write buffer kept for reuse;
// larger appends use a buffer of their own.
const directAppendKeep = 1 << 20

// writeEnd writes p at s.end: a plain WriteAt, or, with DirectIO, the
// block write described above. Called by the writer (with or without mu);
// s.end is not advanced. A
// segment whose size is not a multiple of 4 KiB (made with another
// SegmentSize) is written the plain way, so no block write passes its end.
func (l *Log) writeEnd(s *segment, p []byte) error {
	if l.opts.DirectIO <= 0 || s.size%vfs.DirectAlign != 0 {
		if _, err := s.f.WriteAt(p, s.end); err != nil {
			return fmt.Errorf("commitlog: write %s at %d: %w", s.path, s.end, err)
		}
		return nil
	}
	const a = vfs.DirectAlign
	lo := alignDown(s.end, a)
	if !s.blkOK {
		if cap(s.blk) < a {
			s.blk = make([]byte, 0, a)
		}
		s.blk = s.blk[:s.end-lo]
		if _, err := s.f.ReadAt(s.blk, lo); err != nil {
			return fmt.Errorf("commitlog: read %s at %d: %w", s.path, lo, err)
		}
		s.blkOK = true
	}
	n := len(s.blk) + len(p)
	size := int(alignUp(int64(n), a))
	w := l.w.dbuf
	if cap(w) < size {
		w = vfs.AlignedBuffer(size)
		if size <= directAppendKeep {
			l.w.dbuf = w
		}
	}
	w = w[:size]
	copy(w, s.blk)
	copy(w[len(s.blk):], p)
	clear(w[n:])
	f := l.directHandleLocked(s)
	if _, err := f.WriteAt(w, lo); err != nil {
		// The block's bytes before end are intact or rewritten with the
		// same values; only p may be torn, as with a buffered write.
		return fmt.Errorf("commitlog: write %s at %d: %w", s.path, lo, err)
	}
	end := s.end + int64(len(p))
	nlo := alignDown(end, a)
	s.blk = append(s.blk[:0], w[nlo-lo:end-lo]...)
	return nil
}

// directHandleLocked returns the handle direct appends to s go through:
// its direct-I/O handle, opened on first use, or its buffered one if the
// file system has no direct I/O (or opening failed; it is tried once per
// segment and the failure logged, as it costs speed, never data).
func (l *Log) directHandleLocked(s *segment) vfs.File {
	if s.df == nil && s.dfErr == nil {
		s.df, s.dfErr = vfs.OpenDirect(l.fs, s.path)
		if s.dfErr != nil {
			lvl := l.log.Warn
			if errors.Is(s.dfErr, vfs.ErrDirectUnsupported) {
				lvl = l.log.Debug
			}
			lvl("commitlog: no direct I/O; appends go through the page cache", "segment", s.path, "err", s.dfErr)
		}
	}
	if s.df != nil {
		return s.df
	}
	return s.f
}
