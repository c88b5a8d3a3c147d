package commitlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftmq/raftmq/internal/failpoint"
	"github.com/raftmq/raftmq/internal/vfs"
)

// FlushMode says when appended entries are made durable.
type FlushMode int

const (
	// FlushSync: AppendSync fdatasyncs its entries on the writer's
	// goroutine before it returns; entries of a plain Append are synced by
	// the flusher goroutine, which Sync waits for.
	FlushSync FlushMode = iota
	// FlushAsync: entries are synced every FlushInterval in the background;
	// AppendSync returns as soon as the entries are in the page cache.
	FlushAsync
)

func (m FlushMode) String() string {
	if m == FlushAsync {
		return "async"
	}
	return "sync"
}

const (
	// DefaultSegmentSize is the size of a segment file: 1 GiB, as RocketMQ.
	DefaultSegmentSize = 1 << 30
	minSegmentSize     = 4096
)

// Options configure a Log.
type Options struct {
	// SegmentSize is the size of new segment files (default 1 GiB). Every
	// replica of a group must use the same size, so physical offsets agree.
	SegmentSize int64
	// Flush selects group-commit (FlushSync, the default) or background
	// (FlushAsync) durability.
	Flush FlushMode
	// FlushInterval is the background sync period in FlushAsync mode
	// (default 10 ms).
	FlushInterval time.Duration
	// CheckpointInterval bounds how often the durable-index checkpoint is
	// rewritten (default 100 ms).
	CheckpointInterval time.Duration
	// DurableIndex is a caller-known lower bound of the synced entries (for
	// raft, the persisted commit index); recovery treats a bad entry at or
	// below it as corruption.
	DurableIndex uint64
	// WarmAhead is how many bytes ahead of the write position a background
	// goroutine keeps the active segment zero-filled and synced, so that
	// appends do not pay for block allocation in their fdatasync (see
	// warm.go); it is rounded up to a multiple of 4 KiB. 0 selects the
	// default: DefaultWarmAhead (64 MiB) in FlushSync mode, off in
	// FlushAsync mode, where no append waits for a sync (and warming would
	// only double the bytes written). Negative turns the warm-up off. It
	// changes no file's content, only which blocks are allocated.
	WarmAhead int64
	// WarmMaxRate is the append rate, in bytes per second, above which
	// the warm-up pauses (0: DefaultWarmMaxRate; negative: it never
	// pauses). At high rates each fdatasync covers many blocks, so the
	// allocation it commits costs little per append, while zeroing costs
	// as much CPU and disk bandwidth as the data itself.
	WarmMaxRate int64
	// CacheWindow is how many bytes behind the durable end of the log stay
	// in the OS page cache; older bytes are released (unmapped and
	// POSIX_FADV_DONTNEED) by the flusher, DropChunk at a time, as the log
	// grows. 0 selects DefaultCacheWindow (1 GiB); negative keeps
	// everything cached. Reads of released bytes go to the disk; content
	// never changes. See cache.go for why.
	CacheWindow int64
	// TailCache is how many bytes of the most recently appended entries
	// Entries serves from memory instead of the mapped segments (see
	// tail.go). 0 selects DefaultTailCache (32 MiB); negative turns it off.
	TailCache int64
	// DirectIO, when positive, selects direct appends (direct.go): each
	// append is written as whole 4 KiB blocks from an aligned buffer,
	// through an O_DIRECT handle when the file system offers one, so
	// appended bytes bypass the page cache. 0 or negative: buffered
	// writes (the default; direct appends measured no faster on the VMs
	// raftmq is benchmarked on, see direct.go). It needs the tail cache
	// and a segment size that is a multiple of 4 KiB, and is off without
	// them. It changes no byte on disk.
	DirectIO int
	// Logger receives recovery and error reports (default: discard).
	Logger *slog.Logger
	// Failpoints are the known-bad behaviours on (internal/failpoint; only
	// in builds with -tags mutant): here crc-unchecked, which turns off
	// entry checksum verification on recovery and reads. The zero value is
	// the correct log.
	Failpoints failpoint.Set
}

func (o *Options) fill() error {
	if o.SegmentSize == 0 {
		o.SegmentSize = DefaultSegmentSize
	}
	if o.SegmentSize < minSegmentSize || o.SegmentSize > 1<<32-1 {
		return fmt.Errorf("commitlog: segment size %d outside [%d, 4 GiB)", o.SegmentSize, minSegmentSize)
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = 10 * time.Millisecond
	}
	if o.CheckpointInterval <= 0 {
		o.CheckpointInterval = 100 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.WarmAhead == 0 && o.Flush == FlushSync {
		o.WarmAhead = DefaultWarmAhead
	}
	if o.CacheWindow == 0 {
		o.CacheWindow = DefaultCacheWindow
	}
	if o.TailCache == 0 {
		o.TailCache = DefaultTailCache
	}
	if o.TailCache < 0 || o.SegmentSize%vfs.DirectAlign != 0 {
		o.DirectIO = -1
	}
	if o.WarmMaxRate == 0 {
		o.WarmMaxRate = DefaultWarmMaxRate
		if o.DirectIO > 0 {
			o.WarmMaxRate = -1 // see DefaultWarmMaxRate
		}
	}
	return nil
}

// segment is one open segment file.
type segment struct {
	base  int64  // global offset of byte 0
	size  int64  // file size
	start int64  // position of the first entry
	first uint64 // raft index of the first entry (to be)
	path  string
	f     vfs.File
	m     vfs.Mapping
	data  []byte   // read-only view of the whole file
	pos   []uint32 // pos[i]: position of entry first+i
	end   int64    // position after the last entry (next write position)
	// sealed: the segment is closed for writes and fully synced.
	sealed bool
	// Direct appends (direct.go): df is the segment's direct-I/O handle
	// (nil until the first direct append, or when the file system has
	// none), and blk holds the bytes [alignDown(end, 4096), end) of the
	// file when blkOK is set.
	df    vfs.File
	dfErr error
	blk   []byte
	blkOK bool
}

func (s *segment) last() uint64 { return s.first + uint64(len(s.pos)) - 1 }

func (s *segment) close() error {
	err := s.m.Close()
	if s.df != nil {
		if cerr := s.df.Close(); err == nil {
			err = cerr
		}
		s.df = nil
	}
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Log is a segmented raft log with one writer. A Log itself only reads
// (and drops whole segments from the front, syncs and closes): the
// writing methods are on the Writer handle that Log.Writer hands out to
// one owner at a time (see "One writer" in the package documentation).
// DropPrefix and every read may run concurrently with everything.
type Log struct {
	fs   vfs.FS
	dir  string
	opts Options
	log  *slog.Logger

	// mu guards what readers see. The writer changes last, lastTerm, the
	// segments' pos, end and sealed, and the tail cache only under its
	// write lock, and, being their only writer, reads them without it.
	mu struct {
		sync.RWMutex
		segs     []*segment
		first    uint64 // index of the first entry, or of the next one if empty
		last     uint64 // index of the last entry; first-1 if empty
		lastTerm uint64
		werr     error // sticky write error
		closed   bool
		writer   bool // a Writer handle is out (Log.Writer)
		// tail is the tail cache (tail.go): chunks of consecutive
		// entries, oldest first, tailBytes in all.
		tail      []tailChunk
		tailBytes int
	}

	// w is the writer's own state, used by the writer alone and guarded
	// by no lock (see "One writer" in the package documentation).
	w struct {
		active *segment // the last segment, where appends go; nil if none
		wbuf   []byte   // reused encoding buffer (tail cache off)
		dbuf   []byte   // reused aligned buffer of direct appends
		busy   atomic.Bool
	}
	// refusing is set, under mu, once the log refuses writes (mu.closed or
	// mu.werr set), so the writer need not take mu to check.
	refusing atomic.Bool

	// flushMu is held while syncing a segment file, and by anything that
	// closes segment files, so the flusher never syncs a closed file. (The
	// warm-up writes and syncs through handles of its own; see warm.go.)
	flushMu sync.Mutex
	// released: global position below which the page cache was released
	// (cache.go). Guarded by flushMu.
	released int64

	sm struct {
		sync.Mutex
		cond     *sync.Cond
		durable  uint64 // entries <= durable are synced
		ckpt     uint64 // durable index in the checkpoint file
		ckptSeq  uint64
		ckptTime time.Time
		err      error
	}
	ckptMu   sync.Mutex // serialises checkpoint writes
	ckptFile vfs.File

	// warm is the segment warm-up's state (warm.go). Lock order: mu, then
	// warm.
	warm warmState

	kick chan struct{}
	done chan struct{}
	wg   sync.WaitGroup
}

// Open opens (creating if needed) the log in dir, recovering from an unclean
// stop as the package documentation describes.
func Open(fs vfs.FS, dir string, opts Options) (*Log, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	if err := fs.MkdirAll(dir, vfs.DirMode); err != nil {
		return nil, fmt.Errorf("commitlog: create %q: %w", dir, err)
	}
	l := &Log{fs: fs, dir: dir, opts: opts, log: opts.Logger, kick: make(chan struct{}, 1), done: make(chan struct{})}
	l.sm.cond = sync.NewCond(&l.sm.Mutex)
	l.initWarm()
	if err := l.openCheckpoint(); err != nil {
		return nil, err
	}
	if err := l.recover(); err != nil {
		l.closeFiles()
		return nil, err
	}
	l.setActiveLocked() // no other goroutine yet
	l.sm.durable = l.mu.last
	l.wg.Add(1)
	go l.flushLoop()
	l.startWarm()
	return l, nil
}

// closeFiles closes every file. The background goroutines must have
// stopped.
func (l *Log) closeFiles() {
	l.stopWarm()
	for _, s := range l.mu.segs {
		s.close()
	}
	l.mu.segs = nil
	if l.ckptFile != nil {
		l.ckptFile.Close()
	}
}

// Close syncs and closes the log.
func (l *Log) Close() error {
	err := l.Sync()
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	l.mu.closed = true
	l.refusing.Store(true)
	l.mu.Unlock()
	close(l.done)
	l.wg.Wait()
	if err == nil {
		err = l.writeCheckpoint(l.durableIndex(), ckptClean)
	}
	l.flushMu.Lock()
	l.mu.Lock()
	l.closeFiles()
	l.mu.Unlock()
	l.flushMu.Unlock()
	return err
}

// Dir returns the log's directory.
func (l *Log) Dir() string { return l.dir }

// FirstIndex returns the index of the first entry (LastIndex()+1 if empty).
func (l *Log) FirstIndex() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.first
}

// LastIndex returns the index of the last entry.
func (l *Log) LastIndex() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.last
}

// LastTerm returns the term of the last entry (0 if empty).
func (l *Log) LastTerm() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.lastTerm
}

// EndPosition returns the global position after the last entry: where the
// next entry goes if it fits in the current segment.
func (l *Log) EndPosition() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if n := len(l.mu.segs); n > 0 {
		s := l.mu.segs[n-1]
		return s.base + s.end
	}
	return 0
}

// Err returns the sticky write error, if any.
func (l *Log) Err() error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.werr
}

// segFor returns the segment holding raft index i. Caller holds mu.
func (l *Log) segForLocked(i uint64) (*segment, error) {
	if i < l.mu.first {
		return nil, fmt.Errorf("%w: %d < first %d", ErrCompacted, i, l.mu.first)
	}
	if i > l.mu.last {
		return nil, fmt.Errorf("%w: %d > last %d", ErrUnavailable, i, l.mu.last)
	}
	segs := l.mu.segs
	k := sort.Search(len(segs), func(k int) bool { return segs[k].first > i }) - 1
	for ; k >= 0; k-- { // skip empty segments sharing a first index
		if s := segs[k]; len(s.pos) > 0 && i <= s.last() {
			return s, nil
		}
	}
	return nil, fmt.Errorf("%w: index %d not found in segments", ErrUnavailable, i)
}

// append is Writer.Append without waking the flusher.
func (l *Log) append(ents []Entry) error {
	if len(ents) == 0 {
		return nil
	}
	// mu.last is the writer's to change: no lock is needed to read it, and
	// nothing can move it between this test and the truncation.
	if ents[0].Index <= l.mu.last {
		if err := l.truncateSuffix(ents[0].Index); err != nil {
			return err
		}
	}
	return l.appendEntries(ents)
}

// refusal is the error of a write refused after the sticky failure werr.
// A full device that failed the log where it could not be retried (the
// log's state had changed) is reported as such but does not pass for a
// full device (vfs.IsNoSpace): waiting for space would not help, and the
// caller's retry loop must not wait forever. Caller holds mu.
func (l *Log) refusal() error {
	if vfs.IsNoSpace(l.mu.werr) {
		return fmt.Errorf("commitlog: refusing writes after an earlier failure (a full device, where the write could not be retried): %v", l.mu.werr)
	}
	return fmt.Errorf("commitlog: refusing writes after an earlier failure: %w", l.mu.werr)
}

// refusalLocked returns why the log refuses writes (nil if it does not).
// Caller holds mu.
func (l *Log) refusalLocked() error {
	if l.mu.closed {
		return ErrClosed
	}
	if l.mu.werr != nil {
		return l.refusal()
	}
	return nil
}

// appendEntries writes ents, which follow the last entry, and publishes
// them. Called by the writer, without mu: the bytes go past the end
// readers see, and mu's write lock is taken only to publish them (the new
// positions, end and last index, and the tail cache's chunk), after they
// are written.
func (l *Log) appendEntries(ents []Entry) error {
	if l.refusing.Load() {
		l.mu.RLock()
		err := l.refusalLocked()
		l.mu.RUnlock()
		if err != nil {
			return err
		}
	}
	next := l.mu.last + 1
	for i := range ents {
		if ents[i].Index != next+uint64(i) {
			return fmt.Errorf("%w: entry %d has index %d, want %d", ErrGap, i, ents[i].Index, next+uint64(i))
		}
		if ents[i].Term < l.mu.lastTerm || (i > 0 && ents[i].Term < ents[i-1].Term) {
			return fmt.Errorf("commitlog: entry %d term %d goes backwards", ents[i].Index, ents[i].Term)
		}
		if max := l.opts.SegmentSize - SegmentHeaderSize - sealSize; int64(EncodedSize(len(ents[i].Data))) > max {
			return fmt.Errorf("%w: entry %d is %d bytes, segment room is %d", ErrEntryTooLarge, ents[i].Index, EncodedSize(len(ents[i].Data)), max)
		}
	}
	buf := l.w.wbuf
	defer func() { l.w.wbuf = buf[:0] }()
	for len(ents) > 0 {
		s, err := l.activeSegment(ents[0])
		if err != nil {
			return err
		}
		// Take as many entries as fit in this segment.
		room := s.size - s.end
		n, total := 0, 0
		for n < len(ents) {
			sz := EncodedSize(len(ents[n].Data))
			if int64(total+sz) > room {
				break
			}
			total += sz
			n++
		}
		switch {
		case l.opts.TailCache > 0:
			buf = make([]byte, total) // kept by the tail cache
		case cap(buf) < total:
			buf = make([]byte, total)
		}
		buf = buf[:total]
		l.warmReserve(s, s.end, s.end+int64(total))
		off := 0
		for i := 0; i < n; i++ {
			putEntry(buf[off:], &ents[i])
			off += EncodedSize(len(ents[i].Data))
		}
		if err := l.writeEnd(s, buf); err != nil {
			l.mu.Lock()
			defer l.mu.Unlock()
			if rerr := l.refusalLocked(); rerr != nil {
				return rerr // closed or failed meanwhile; the write error follows from it
			}
			return l.failUnlessNoSpace(err)
		}
		var offs []uint32
		if l.opts.TailCache > 0 {
			offs = make([]uint32, n)
		}
		// Publish. A log closed or failed since the check above keeps
		// the bytes unpublished, as if the write had not returned.
		l.mu.Lock()
		if err := l.refusalLocked(); err != nil {
			l.mu.Unlock()
			return err
		}
		off = 0
		for i := 0; i < n; i++ {
			s.pos = append(s.pos, uint32(s.end)+uint32(off))
			if offs != nil {
				offs[i] = uint32(off)
			}
			off += EncodedSize(len(ents[i].Data))
		}
		if offs != nil {
			l.tailAddLocked(tailChunk{first: ents[0].Index, pos: s.base + s.end, buf: buf, offs: offs})
			buf = nil // the cache owns it; the next append allocates anew
		}
		s.end += int64(total)
		l.mu.last = ents[n-1].Index
		l.mu.lastTerm = ents[n-1].Term
		l.mu.Unlock()
		ents = ents[n:]
	}
	return nil
}

// fail records a sticky write error. Caller holds mu.
func (l *Log) fail(err error) error {
	if l.mu.werr == nil {
		l.mu.werr = err
		l.refusing.Store(true)
		l.log.Error("commitlog: write failure; refusing further writes", "err", err)
	}
	return err
}

// failUnlessNoSpace is fail, except for a full device: a write that found
// no space changed nothing the log keeps in memory (the segment's end, its
// positions, the last index move only after the write), so the same
// entries can be appended again once space frees. The caller (raft's
// Ready loop) retries; the error is not sticky. Caller holds mu.
func (l *Log) failUnlessNoSpace(err error) error {
	if vfs.IsNoSpace(err) {
		return err
	}
	return l.fail(err)
}

// activeSegment returns the segment the entry e goes into, sealing the
// current segment and creating a new one if e does not fit. Called by the
// writer; a roll (rare) holds mu throughout, as it changes the segment
// list.
func (l *Log) activeSegment(e Entry) (*segment, error) {
	sz := int64(EncodedSize(len(e.Data)))
	s := l.w.active
	if s != nil && s.end+sz <= s.size {
		return s, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.refusalLocked(); err != nil {
		return nil, err
	}
	base := int64(0)
	if s != nil {
		l.warmRetargetLocked(nil)
		if err := l.sealLocked(s); err != nil {
			return nil, l.failUnlessNoSpace(err)
		}
		base = s.base + s.size
	}
	s, err := l.createSegmentLocked(base, e.Index, SegmentHeaderSize)
	if err != nil {
		return nil, l.failUnlessNoSpace(err)
	}
	return s, nil
}

// setActiveLocked points the writer at the last segment after the
// segment list changed. Called by the writer (or recovery) with mu held.
func (l *Log) setActiveLocked() {
	l.w.active = nil
	if n := len(l.mu.segs); n > 0 {
		l.w.active = l.mu.segs[n-1]
	}
}

// sealLocked writes the seal, syncs the segment and writes its sidecar.
func (l *Log) sealLocked(s *segment) error {
	if left := s.size - s.end; left >= sealSize {
		var b [sealSize]byte
		binary.BigEndian.PutUint32(b[sealOffMagic:], sealMagic)
		binary.BigEndian.PutUint32(b[sealOffLeft:], uint32(left))
		l.warmReserve(s, s.end, s.end+sealSize)
		if err := l.writeEnd(s, b[:]); err != nil {
			return fmt.Errorf("%w (the seal)", err)
		}
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("commitlog: sync %s: %w", s.path, err)
	}
	s.sealed = true
	if err := l.writeSidecar(s); err != nil {
		return err
	}
	l.sm.Lock()
	if last := s.last(); len(s.pos) > 0 && last > l.sm.durable {
		l.sm.durable = last
		l.sm.cond.Broadcast()
	}
	l.sm.Unlock()
	return nil
}

func (l *Log) writeSidecar(s *segment) error {
	b := make([]byte, idxOffPos+4*len(s.pos)+4)
	binary.BigEndian.PutUint32(b[idxOffMagic:], idxMagic)
	binary.BigEndian.PutUint32(b[idxOffCount:], uint32(len(s.pos)))
	binary.BigEndian.PutUint64(b[idxOffFirst:], s.first)
	for i, p := range s.pos {
		binary.BigEndian.PutUint32(b[idxOffPos+4*i:], p)
	}
	n := len(b) - 4
	binary.BigEndian.PutUint32(b[n:], crc32.Checksum(b[:n], castagnoli))
	if err := vfs.WriteFileAtomic(l.fs, l.dir, segmentName(s.base)+".idx", b); err != nil {
		return fmt.Errorf("commitlog: write index sidecar of %s: %w", s.path, err)
	}
	return nil
}

// createSegmentLocked creates, preallocates, maps and syncs a new segment.
func (l *Log) createSegmentLocked(base int64, first uint64, start int64) (*segment, error) {
	path := vfs.Join(l.dir, segmentName(base))
	f, err := l.fs.Create(path)
	if err != nil {
		return nil, fmt.Errorf("commitlog: create segment %s: %w", path, err)
	}
	s := &segment{base: base, size: l.opts.SegmentSize, start: start, first: first, path: path, f: f, end: start}
	var hdr [SegmentHeaderSize]byte
	putSegHeader(hdr[:], s.size, base, first, uint32(start))
	err = f.Truncate(s.size)
	if err == nil {
		_, err = f.WriteAt(hdr[:], 0)
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = l.fs.SyncDir(l.dir)
	}
	if err == nil {
		s.m, err = f.Map(s.size)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("commitlog: create segment %s: %w", path, err)
	}
	s.data = s.m.Bytes()
	l.mu.segs = append(l.mu.segs, s)
	l.w.active = s
	l.warmRetargetLocked(s)
	return s, nil
}

func (l *Log) kickFlusher() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// Sync makes every appended entry durable.
func (l *Log) Sync() error {
	l.mu.RLock()
	last, werr := l.mu.last, l.mu.werr
	l.mu.RUnlock()
	if werr != nil {
		return werr
	}
	l.kickFlusher()
	return l.waitDurable(last)
}

func (l *Log) durableIndex() uint64 {
	l.sm.Lock()
	defer l.sm.Unlock()
	return l.sm.durable
}

// DurableIndex returns the index up to which entries are known synced.
func (l *Log) DurableIndex() uint64 { return l.durableIndex() }

func (l *Log) waitDurable(i uint64) error {
	l.sm.Lock()
	defer l.sm.Unlock()
	for l.sm.durable < i && l.sm.err == nil {
		select {
		case <-l.done:
			return ErrClosed
		default:
		}
		l.sm.cond.Wait()
	}
	if l.sm.durable >= i {
		return nil
	}
	return l.sm.err
}

func (l *Log) flushLoop() {
	defer l.wg.Done()
	var tick <-chan time.Time
	if l.opts.Flush == FlushAsync {
		t := time.NewTicker(l.opts.FlushInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-l.kick:
		case <-tick:
		case <-l.done:
			l.sm.Lock()
			l.sm.cond.Broadcast()
			l.sm.Unlock()
			return
		}
		l.syncOnce()
	}
}

// syncOnce syncs the active segment, publishes the new durable index and
// writes a checkpoint when one is due.
func (l *Log) syncOnce() {
	if l.syncActive() {
		l.mu.RLock()
		target := l.mu.last
		l.mu.RUnlock()
		if d := l.durableIndex(); d < target {
			target = d
		}
		if err := l.writeCheckpoint(target, ckptLazy); err != nil {
			l.log.Warn("commitlog: checkpoint write failed", "err", err)
		}
	}
}

// syncActive syncs the active segment up to the last entry and publishes
// the new durable index (an error goes to the waiters and fails the log).
// It reports whether a checkpoint is due.
func (l *Log) syncActive() (ckptDue bool) {
	l.flushMu.Lock()
	l.mu.RLock()
	target := l.mu.last
	var s *segment
	var end int64
	if n := len(l.mu.segs); n > 0 {
		s = l.mu.segs[n-1]
		end = s.base + s.end
	}
	l.mu.RUnlock()
	if s == nil || target <= l.durableIndex() {
		l.flushMu.Unlock()
		return l.ckptDue()
	}
	err := s.f.Sync()
	if err != nil {
		l.flushMu.Unlock()
		err = fmt.Errorf("commitlog: sync %s: %w", s.path, err)
		l.mu.Lock()
		l.fail(err)
		l.mu.Unlock()
		l.sm.Lock()
		l.sm.err = err
		l.sm.cond.Broadcast()
		l.sm.Unlock()
		return false
	}
	// Publish under flushMu, so a concurrent TruncateSuffix (which holds
	// flushMu) cannot have lowered durable in between.
	l.sm.Lock()
	if target > l.sm.durable {
		l.sm.durable = target
	}
	l.sm.cond.Broadcast()
	due := l.ckptDueLocked()
	l.sm.Unlock()
	l.releaseCacheLocked(end)
	l.flushMu.Unlock()
	return due
}

// ckptDue reports whether the checkpoint is older than CheckpointInterval
// and behind the durable index.
func (l *Log) ckptDue() bool {
	l.sm.Lock()
	defer l.sm.Unlock()
	return l.ckptDueLocked()
}

// ckptDueLocked is ckptDue with sm held.
func (l *Log) ckptDueLocked() bool {
	return time.Since(l.sm.ckptTime) >= l.opts.CheckpointInterval && l.sm.durable > l.sm.ckpt
}

// truncateSuffix is Writer.TruncateSuffix, for the writer (Append's
// conflicts included). It holds flushMu, so the flusher syncs no file it changes,
// and mu, so readers see the log before or after the cut.
func (l *Log) truncateSuffix(from uint64) error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed {
		return ErrClosed
	}
	if l.mu.werr != nil {
		return l.refusal()
	}
	if from > l.mu.last {
		return nil
	}
	if from < l.mu.first {
		return fmt.Errorf("%w: cannot truncate from %d below first index %d", ErrCompacted, from, l.mu.first)
	}
	// The tail cache forgets the entries first, so that whatever happens
	// below, it never serves one the segments no longer hold.
	l.tailTruncateLocked(from)
	// No warming while the tail is rewritten; it resumes at the new end
	// unless the truncation failed the log.
	l.warmRetargetLocked(nil)
	defer func() {
		if n := len(l.mu.segs); n > 0 && l.mu.werr == nil {
			l.warmRetargetLocked(l.mu.segs[n-1])
		}
	}()
	// Lower the checkpoint durably before any byte at or after from changes,
	// so a crash cannot make a later torn write there look like corruption.
	l.sm.Lock()
	if l.sm.durable >= from {
		l.sm.durable = from - 1
	}
	l.sm.Unlock()
	if err := l.writeCheckpoint(from-1, ckptForce); err != nil {
		// Nothing but the checkpoint was written: a full device leaves the
		// log as it was, and the truncation can be tried again.
		return l.failUnlessNoSpace(err)
	}
	s, err := l.segForLocked(from)
	if err != nil {
		return err
	}
	k := l.segIdx(s)
	// Drop later segments.
	for _, t := range l.mu.segs[k+1:] {
		if err := l.removeSegment(t); err != nil {
			return l.fail(err)
		}
	}
	l.mu.segs = l.mu.segs[:k+1]
	l.setActiveLocked()
	cut := int64(s.pos[from-s.first])
	if from == s.first && k > 0 {
		// s empties: remove it and reopen the previous segment for writes,
		// so the next entry lands where the leader's does.
		if err := l.removeSegment(s); err != nil {
			return l.fail(err)
		}
		l.mu.segs = l.mu.segs[:k]
		l.setActiveLocked()
		prev := l.mu.segs[k-1]
		if err := zeroFrom(prev, prev.end); err != nil {
			return l.fail(err)
		}
		prev.sealed = false
		if err := l.fs.Remove(vfs.Join(l.dir, segmentName(prev.base)+".idx")); err != nil && !errors.Is(err, vfs.ErrNotExist) {
			return l.fail(fmt.Errorf("commitlog: remove sidecar: %w", err))
		}
	} else {
		if err := zeroFrom(s, cut); err != nil {
			return l.fail(err)
		}
		s.pos = s.pos[:from-s.first]
		s.end = cut
	}
	l.mu.last = from - 1
	l.mu.lastTerm = l.termLocked(from - 1)
	return l.fs.SyncDir(l.dir)
}

// zeroFrom zeroes a segment from pos to its end and syncs it.
func zeroFrom(s *segment, pos int64) error {
	s.blkOK = false // reloaded from the file by the next direct append
	if err := s.f.Truncate(pos); err != nil {
		return fmt.Errorf("commitlog: truncate %s at %d: %w", s.path, pos, err)
	}
	if err := s.f.Truncate(s.size); err != nil {
		return fmt.Errorf("commitlog: re-extend %s: %w", s.path, err)
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("commitlog: sync %s: %w", s.path, err)
	}
	return nil
}

func (l *Log) segIdx(s *segment) int {
	for k, t := range l.mu.segs {
		if t == s {
			return k
		}
	}
	return -1
}

func (l *Log) removeSegment(s *segment) error {
	s.close()
	if err := l.fs.Remove(s.path); err != nil && !errors.Is(err, vfs.ErrNotExist) {
		return fmt.Errorf("commitlog: remove %s: %w", s.path, err)
	}
	if err := l.fs.Remove(s.path + ".idx"); err != nil && !errors.Is(err, vfs.ErrNotExist) {
		return fmt.Errorf("commitlog: remove %s.idx: %w", s.path, err)
	}
	return nil
}

// termLocked returns the term of entry i, 0 if it is not in the log.
func (l *Log) termLocked(i uint64) uint64 {
	if b, _, ok := l.tailEntryLocked(i); ok {
		return binary.BigEndian.Uint64(b[entOffTerm:])
	}
	s, err := l.segForLocked(i)
	if err != nil {
		return 0
	}
	p := s.pos[i-s.first]
	return binary.BigEndian.Uint64(s.data[int(p)+entOffTerm:])
}

// DropPrefix removes whole segments all of whose entries are below index
// (retention or a snapshot). The active segment is never removed. It returns
// the number of bytes freed.
func (l *Log) DropPrefix(index uint64) (int64, error) {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	var freed int64
	n := 0
	for n < len(l.mu.segs)-1 {
		s := l.mu.segs[n]
		if len(s.pos) > 0 && s.last() >= index {
			break
		}
		if err := l.removeSegment(s); err != nil {
			return freed, err
		}
		freed += s.size
		n++
	}
	if n == 0 {
		return 0, nil
	}
	l.mu.segs = append([]*segment(nil), l.mu.segs[n:]...)
	l.mu.first = l.mu.segs[0].first
	l.tailDropBelowLocked(l.mu.first)
	if err := l.fs.SyncDir(l.dir); err != nil {
		return freed, fmt.Errorf("commitlog: sync dir: %w", err)
	}
	return freed, nil
}

// reset is Writer.Reset.
func (l *Log) reset(next uint64, pos int64) error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.werr != nil {
		return l.mu.werr
	}
	size := l.opts.SegmentSize
	base := pos - pos%size
	start := pos - base
	if start == 0 {
		start = SegmentHeaderSize
	}
	if start < SegmentHeaderSize {
		return fmt.Errorf("commitlog: reset position %d lies inside a segment header", pos)
	}
	if err := l.writeCheckpoint(next-1, ckptForce); err != nil {
		return err
	}
	l.warmRetargetLocked(nil) // createSegmentLocked retargets it
	l.tailResetLocked()
	for _, s := range l.mu.segs {
		if err := l.removeSegment(s); err != nil {
			return l.fail(err)
		}
	}
	l.mu.segs = nil
	l.w.active = nil
	if _, err := l.createSegmentLocked(base, next, start); err != nil {
		return l.fail(err)
	}
	l.mu.first, l.mu.last, l.mu.lastTerm = next, next-1, 0
	l.sm.Lock()
	l.sm.durable = next - 1
	l.sm.Unlock()
	return nil
}

// Term returns the term of entry i.
func (l *Log) Term(i uint64) (uint64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if b, _, ok := l.tailEntryLocked(i); ok {
		return binary.BigEndian.Uint64(b[entOffTerm:]), nil
	}
	s, err := l.segForLocked(i)
	if err != nil {
		return 0, err
	}
	p := s.pos[i-s.first]
	return binary.BigEndian.Uint64(s.data[int(p)+entOffTerm:]), nil
}

// Position returns the global position of entry i's header.
func (l *Log) Position(i uint64) (int64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	s, err := l.segForLocked(i)
	if err != nil {
		return 0, err
	}
	return s.base + int64(s.pos[i-s.first]), nil
}

// Entries returns entries [lo, hi), stopping before maxSize bytes of bodies
// are exceeded but always returning at least one entry (raft's
// Storage.Entries contract). Bodies are copies of the mapped segment, or
// alias the tail cache (tail.go); either way they stay valid and
// unchanged, and callers must not modify them.
func (l *Log) Entries(lo, hi, maxSize uint64) ([]Entry, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if lo < l.mu.first {
		return nil, fmt.Errorf("%w: %d < first %d", ErrCompacted, lo, l.mu.first)
	}
	if hi > l.mu.last+1 {
		return nil, fmt.Errorf("%w: %d > last %d", ErrUnavailable, hi-1, l.mu.last)
	}
	var out []Entry
	var size uint64
	for i := lo; i < hi; i++ {
		b, pos, cached := l.tailEntryLocked(i)
		if !cached {
			s, err := l.segForLocked(i)
			if err != nil {
				return nil, err
			}
			p := s.pos[i-s.first]
			b, pos = s.data[p:], s.base+int64(p)
		}
		n := binary.BigEndian.Uint32(b[entOffBodyLen:])
		size += uint64(n)
		if len(out) > 0 && size > maxSize {
			break
		}
		e := Entry{
			Index: binary.BigEndian.Uint64(b[entOffIndex:]),
			Term:  binary.BigEndian.Uint64(b[entOffTerm:]),
			Type:  binary.BigEndian.Uint32(b[entOffType:]),
			Pos:   pos,
		}
		switch body := b[HeaderSize : HeaderSize+n : HeaderSize+n]; {
		case !cached:
			e.Data = append([]byte(nil), body...) // the mapping may go; copy
		case n > 0:
			e.Data = body // the cache's buffers never change
		}
		out = append(out, e)
	}
	return out, nil
}

// EntryRef is an entry seen in place; Body aliases the mapped segment and is
// valid only during the callback that received it.
type EntryRef struct {
	Index, Term uint64
	Type        uint32
	Pos         int64 // global position of the header
	Body        []byte
}

// Scan calls fn for entries lo..LastIndex() in order, under the read lock,
// until fn returns an error (returned as is) or io.EOF (stops, returns nil).
// With verify set, each entry's CRC is checked and a mismatch is a
// *CorruptError.
func (l *Log) Scan(lo uint64, verify bool, fn func(EntryRef) error) error {
	if failpoint.On(l.opts.Failpoints, failpoint.CRCUnchecked) {
		verify = crcUnchecked(verify)
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if lo < l.mu.first {
		return fmt.Errorf("%w: %d < first %d", ErrCompacted, lo, l.mu.first)
	}
	for i := lo; i <= l.mu.last; i++ {
		s, err := l.segForLocked(i)
		if err != nil {
			return err
		}
		p := int(s.pos[i-s.first])
		b := s.data[p:]
		n := binary.BigEndian.Uint32(b[entOffBodyLen:])
		if verify {
			if h, reason := parseHeader(b, s.size-int64(p)); reason != "" || h.crc != entryCRC(b[:HeaderSize+n]) || h.index != i {
				if reason == "" {
					reason = "CRC mismatch"
				}
				return &CorruptError{File: s.path, Offset: int64(p), Index: i, Reason: reason}
			}
		}
		ref := EntryRef{
			Index: i,
			Term:  binary.BigEndian.Uint64(b[entOffTerm:]),
			Type:  binary.BigEndian.Uint32(b[entOffType:]),
			Pos:   s.base + int64(p),
			Body:  b[HeaderSize : HeaderSize+n : HeaderSize+n],
		}
		if err := fn(ref); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
	return nil
}

// ReadAt copies len(p) bytes at global position pos. The range must lie in
// one segment, inside written entries.
func (l *Log) ReadAt(p []byte, pos int64) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.readAtLocked(p, pos)
}

func (l *Log) readAtLocked(p []byte, pos int64) error {
	segs := l.mu.segs
	k := sort.Search(len(segs), func(k int) bool { return segs[k].base > pos }) - 1
	if k < 0 {
		return fmt.Errorf("%w: %d (below the first segment)", ErrBadPosition, pos)
	}
	s := segs[k]
	off := pos - s.base
	if off < s.start || off+int64(len(p)) > s.end {
		return fmt.Errorf("%w: %d..%d outside written range of %s", ErrBadPosition, pos, pos+int64(len(p)), s.path)
	}
	if !l.tailReadLocked(p, pos) {
		copy(p, s.data[off:])
	}
	return nil
}

// ReadMany performs several ReadAt under one lock acquisition: for each i,
// it copies into bufs[i] from positions[i]. It stops at the first error.
func (l *Log) ReadMany(bufs [][]byte, positions []int64) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for i := range bufs {
		if err := l.readAtLocked(bufs[i], positions[i]); err != nil {
			return err
		}
	}
	return nil
}

// MinPosition returns the global position of the first entry.
func (l *Log) MinPosition() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if len(l.mu.segs) == 0 {
		return 0
	}
	s := l.mu.segs[0]
	if len(s.pos) > 0 {
		return s.base + int64(s.pos[0])
	}
	return s.base + s.start
}

// SegmentInfo describes one segment.
type SegmentInfo struct {
	Path       string
	Base       int64
	Size       int64
	FirstIndex uint64
	Entries    int
	Written    int64 // bytes up to the end of the last entry
	Sealed     bool
}

// Segments describes the segments in order.
func (l *Log) Segments() []SegmentInfo {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]SegmentInfo, len(l.mu.segs))
	for i, s := range l.mu.segs {
		out[i] = SegmentInfo{Path: s.path, Base: s.base, Size: s.size, FirstIndex: s.first, Entries: len(s.pos), Written: s.end, Sealed: s.sealed}
	}
	return out
}
