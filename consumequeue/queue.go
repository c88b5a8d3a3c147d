package consumequeue

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/raftmq/raftmq/internal/vfs"
)

// Errors, tested with errors.Is; the returned errors wrap them with the
// queue, the offsets and, for ErrCorrupt, the file and byte offset.
var (
	// ErrCorrupt is returned by OpenQueue, OpenSet and the read methods when
	// a queue's files are malformed: a missing middle file, a file of the
	// wrong size, a unit with a negative offset or size, or units that go
	// backwards in the commit log. Consume queues are derived data: the
	// owner may remove the queue's directory and rebuild it from the commit
	// log.
	ErrCorrupt = errors.New("consumequeue: corrupt queue file")
	// ErrOffsetMismatch is returned by Put when the queue offset is not
	// MaxOffset (a gap or an overlap) and no identical unit is stored there.
	ErrOffsetMismatch = errors.New("consumequeue: queue offset mismatch")
	// ErrOffsetOutOfRange is returned by Get, Read and TruncateTo for an
	// offset outside the queue's range.
	ErrOffsetOutOfRange = errors.New("consumequeue: queue offset out of range")
	// ErrInvalidUnit is returned by Put for a unit with size <= 0 or a
	// negative commit-log offset, or one that would overlap the previous
	// unit in the commit log.
	ErrInvalidUnit = errors.New("consumequeue: invalid unit")
	// ErrInvalidArgument is returned for a bad topic name, queue id, option
	// or offset argument.
	ErrInvalidArgument = errors.New("consumequeue: invalid argument")
	// ErrNoQueue is returned by Set.Queue when the queue does not exist and
	// create is false.
	ErrNoQueue = errors.New("consumequeue: no such queue")
	// ErrClosed is returned by the methods of a closed Queue or Set.
	ErrClosed = errors.New("consumequeue: closed")
)

// Options configure a Queue or Set. The zero value is RocketMQ's defaults.
type Options struct {
	// UnitsPerFile is the number of units in one file; 0 means
	// DefaultUnitsPerFile. It must match the existing files.
	UnitsPerFile int
	// Logger receives recovery warnings; nil discards them.
	Logger *slog.Logger
}

func (o Options) withDefaults() (Options, error) {
	if o.UnitsPerFile == 0 {
		o.UnitsPerFile = DefaultUnitsPerFile
	}
	if o.UnitsPerFile < 0 || int64(o.UnitsPerFile) > (1<<40)/UnitSize {
		return o, fmt.Errorf("consumequeue: UnitsPerFile %d: %w", o.UnitsPerFile, ErrInvalidArgument)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// segment is one file of a queue.
type segment struct {
	base int64  // queue offset of the file's first unit
	path string // file path
	f    vfs.File
	m    vfs.Mapping
	data []byte // m.Bytes(), the whole file
	// dirty: written since the last Sync. Guarded by Queue.w.
	dirty bool
}

// raw decodes the i-th unit of the file.
func (s *segment) raw(i int64) rawUnit {
	u, _ := decodeUnit(s.data[i*UnitSize:])
	return u
}

func (s *segment) close() error {
	return errors.Join(s.m.Close(), s.f.Close())
}

// Queue is the consume queue of one topic and queue id. See the package
// documentation for its concurrency contract.
type Queue struct {
	fs       vfs.FS
	dir      string
	topic    string
	queueID  int32
	perFile  int64 // units per file
	fileSize int64 // bytes per file
	log      *slog.Logger

	// needSync is set by writes and cleared by Sync, so Set.SyncDirty can
	// skip clean queues without taking their locks.
	needSync atomic.Bool
	// writes counts the writes to the queue's files (under w), so that an
	// owner syncing the whole file system knows which queues it covered
	// (Set.MarkDirty, Set.SyncedByFS).
	writes atomic.Uint64

	// w serialises the writer methods. A writer reads mu's fields holding
	// only w, and takes mu.Lock to change them.
	w struct {
		sync.Mutex
		err error // sticky: after a failed write or sync, refuse writes
		// pend holds the encoded units at offsets [mu.max, mu.max +
		// len(pend)/UnitSize): put with PutBuffered, not yet written, so
		// invisible to readers. See flushLocked.
		pend []byte
	}

	// mu guards what readers see.
	mu struct {
		sync.RWMutex
		// segs are the files in order, contiguous: segs[i+1].base ==
		// segs[i].base + perFile.
		segs []*segment
		// Invariant: len(segs) == 0 implies min == max == 0; otherwise
		// segs[0].base <= min <= max <= segs[len-1].base + perFile and
		// max >= segs[len-1].base.
		min, max int64
		closed   bool
	}
}

// OpenQueue opens the queue of topic/queueID under root, creating its
// directory if needed, and recovers MaxOffset from its files.
func OpenQueue(fs vfs.FS, root, topic string, queueID int32, opts Options) (*Queue, error) {
	if err := checkName(topic, queueID); err != nil {
		return nil, err
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	q := &Queue{
		fs:       fs,
		dir:      vfs.Join(root, topic, strconv.Itoa(int(queueID))),
		topic:    topic,
		queueID:  queueID,
		perFile:  int64(opts.UnitsPerFile),
		fileSize: int64(opts.UnitsPerFile) * UnitSize,
		log:      opts.Logger.With("topic", topic, "queue", queueID),
	}
	if err := mkdirDurable(fs, q.dir); err != nil {
		return nil, fmt.Errorf("consumequeue: open %s: %w", q.name(), err)
	}
	if err := q.load(); err != nil {
		for _, s := range q.mu.segs {
			_ = s.close() // the load error is the one to report
		}
		return nil, fmt.Errorf("consumequeue: open %s: %w", q.name(), err)
	}
	return q, nil
}

// checkName rejects topics that are not a single path element.
func checkName(topic string, queueID int32) error {
	if topic == "" || topic == "." || topic == ".." || len(topic) > 255 ||
		strings.ContainsAny(topic, "/\\\x00") {
		return fmt.Errorf("consumequeue: topic %q: %w", topic, ErrInvalidArgument)
	}
	if queueID < 0 {
		return fmt.Errorf("consumequeue: topic %q queue id %d: %w", topic, queueID, ErrInvalidArgument)
	}
	return nil
}

// mkdirDurable creates dir and its missing parents, and syncs the parent of
// each directory it created.
func mkdirDurable(fs vfs.FS, dir string) error {
	var created []string
	for d := dir; ; {
		if _, err := fs.Stat(d); err == nil {
			break
		} else if !errors.Is(err, vfs.ErrNotExist) {
			return fmt.Errorf("stat %q: %w", d, err)
		}
		created = append(created, d)
		p := vfs.Dir(d)
		if p == d || p == "." || p == "/" {
			break
		}
		d = p
	}
	if len(created) == 0 {
		return nil
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("mkdir %q: %w", dir, err)
	}
	for i := len(created) - 1; i >= 0; i-- {
		if err := fs.SyncDir(vfs.Dir(created[i])); err != nil {
			return fmt.Errorf("sync dir %q: %w", vfs.Dir(created[i]), err)
		}
	}
	return nil
}

// Topic returns the queue's topic.
func (q *Queue) Topic() string { return q.topic }

// QueueID returns the queue's id.
func (q *Queue) QueueID() int32 { return q.queueID }

func (q *Queue) name() string { return q.topic + "/" + strconv.Itoa(int(q.queueID)) }

// MinOffset returns the first readable queue offset.
func (q *Queue) MinOffset() int64 {
	q.mu.RLock()
	defer q.mu.RUnlock()
	return q.mu.min
}

// MaxOffset returns the next queue offset to write: one past the last unit.
func (q *Queue) MaxOffset() int64 {
	q.mu.RLock()
	defer q.mu.RUnlock()
	return q.mu.max
}

// Close writes the buffered units and syncs the files written since the
// last Sync (unless a write has failed), and releases them. Closing a closed
// queue is a no-op.
func (q *Queue) Close() error {
	q.w.Lock()
	defer q.w.Unlock()
	if q.mu.closed {
		return nil
	}
	var errs []error
	if q.w.err == nil {
		errs = append(errs, q.syncLocked()) // writes the buffered units first
	}
	q.w.pend = nil
	q.mu.Lock()
	segs := q.mu.segs
	q.mu.segs, q.mu.closed = nil, true
	q.mu.Unlock()
	for _, s := range segs {
		if err := s.close(); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", s.path, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("consumequeue: close %s: %w", q.name(), err)
	}
	return nil
}

// load opens the queue's files and recovers min and max.
func (q *Queue) load() error {
	names, err := q.fs.List(q.dir)
	if err != nil {
		return fmt.Errorf("list %q: %w", q.dir, err)
	}
	var bases []int64
	for _, name := range names {
		off, ok := parseFileName(name)
		if !ok {
			q.log.Debug("consumequeue: ignoring file", "file", vfs.Join(q.dir, name))
			continue
		}
		if off%q.fileSize != 0 {
			return fmt.Errorf("file %s: name is not a multiple of the file size %d (UnitsPerFile %d): %w",
				vfs.Join(q.dir, name), q.fileSize, q.perFile, ErrCorrupt)
		}
		base := off / UnitSize
		if n := len(bases); n > 0 && base != bases[n-1]+q.perFile {
			return fmt.Errorf("file %s: missing file before it (expected %s): %w",
				vfs.Join(q.dir, name), fileName((bases[n-1]+q.perFile)*UnitSize), ErrCorrupt)
		}
		bases = append(bases, base)
	}
	for i, base := range bases {
		s, err := q.openSegment(base, i == len(bases)-1)
		if err != nil {
			return err
		}
		q.mu.segs = append(q.mu.segs, s)
	}
	return q.recover()
}

// openSegment opens and maps one file, extending a short last file.
func (q *Queue) openSegment(base int64, last bool) (*segment, error) {
	path := vfs.Join(q.dir, fileName(base*UnitSize))
	f, err := q.fs.OpenReadWrite(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	s, err := q.mapSegment(f, path, base, last)
	if err != nil {
		_ = f.Close() // the first error is the one to report
		return nil, err
	}
	return s, nil
}

func (q *Queue) mapSegment(f vfs.File, path string, base int64, last bool) (*segment, error) {
	size, err := f.Size()
	if err != nil {
		return nil, fmt.Errorf("size of %s: %w", path, err)
	}
	switch {
	case size > q.fileSize || (size < q.fileSize && !last):
		return nil, fmt.Errorf("file %s: size %d, want %d (UnitsPerFile %d): %w",
			path, size, q.fileSize, q.perFile, ErrCorrupt)
	case size < q.fileSize:
		// A crash while the file was being created and preallocated.
		q.log.Warn("consumequeue: extending short last file", "file", path, "size", size)
		if err := f.Truncate(q.fileSize); err != nil {
			return nil, fmt.Errorf("extend %s: %w", path, err)
		}
		if err := f.Sync(); err != nil {
			return nil, fmt.Errorf("sync %s: %w", path, err)
		}
	}
	m, err := f.Map(q.fileSize)
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", path, err)
	}
	if int64(len(m.Bytes())) != q.fileSize {
		_ = m.Close()
		return nil, fmt.Errorf("map %s: got %d bytes, want %d", path, len(m.Bytes()), q.fileSize)
	}
	return &segment{base: base, path: path, f: f, m: m, data: m.Bytes()}, nil
}

// corruptAt describes corruption of the unit at index i of s.
func corruptAt(s *segment, i int64, format string, args ...any) error {
	return fmt.Errorf("file %s byte %d (queue offset %d): %s: %w",
		s.path, i*UnitSize, s.base+i, fmt.Sprintf(format, args...), ErrCorrupt)
}

// recover sets min and max from the loaded files; see "Recovery" in the
// package documentation.
func (q *Queue) recover() error {
	if err := q.dropEmptyTail(); err != nil {
		return err
	}
	segs := q.mu.segs
	if len(segs) == 0 {
		return nil
	}
	first := segs[0]
	blanks := int64(0)
	for blanks < q.perFile && first.raw(blanks).blank() {
		blanks++
	}
	q.mu.min = first.base + blanks
	var prev rawUnit // last valid unit seen
	for i, s := range segs[:len(segs)-1] {
		lo := int64(0)
		if i == 0 {
			lo = min(blanks, q.perFile-1) // an all-blank file fails below
		}
		for _, j := range []int64{lo, q.perFile - 1} {
			u := s.raw(j)
			if !u.valid() {
				return corruptAt(s, j, "invalid unit %v in a complete file", u)
			}
			if u.phy < prev.end() {
				return corruptAt(s, j, "unit %v overlaps earlier unit %v", u, prev)
			}
			prev = u
		}
	}
	last := segs[len(segs)-1]
	i := int64(0)
	if len(segs) == 1 {
		i = blanks
	}
	for ; i < q.perFile; i++ {
		u := last.raw(i)
		if u.empty() {
			break
		}
		if !u.valid() {
			return corruptAt(last, i, "invalid unit %v", u)
		}
		if u.phy < prev.end() {
			return corruptAt(last, i, "unit %v overlaps previous unit %v", u, prev)
		}
		prev = u
	}
	q.mu.max = last.base + i
	return q.zeroStale(last, i)
}

// dropEmptyTail removes trailing files without a unit that follow an
// incomplete file: a crash after creating them, before any unit in them
// became durable, and after units of the previous file were lost.
func (q *Queue) dropEmptyTail() error {
	for n := len(q.mu.segs); n > 1; n = len(q.mu.segs) {
		last, prev := q.mu.segs[n-1], q.mu.segs[n-2]
		if !last.raw(0).empty() || !prev.raw(q.perFile-1).empty() {
			return nil
		}
		q.log.Warn("consumequeue: removing empty file after an incomplete one", "file", last.path)
		q.mu.segs = q.mu.segs[:n-1]
		if err := q.removeSegment(last); err != nil {
			return err
		}
	}
	return nil
}

// zeroStale zeroes the units of s from index i on if any byte there is not
// zero: unsynced writes a crash reordered or tore. Left in place they could
// reappear behind later writes.
func (q *Queue) zeroStale(s *segment, i int64) error {
	tail := s.data[i*UnitSize:]
	n := len(tail)
	for n > 0 && tail[n-1] == 0 {
		n--
	}
	if n == 0 {
		return nil
	}
	units := (int64(n) + UnitSize - 1) / UnitSize
	q.log.Warn("consumequeue: zeroing units after the end of the written units (unsynced writes of a crash)",
		"file", s.path, "offset", s.base+i, "units", units)
	if err := zeroRange(s, i, i+units); err != nil {
		return err
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", s.path, err)
	}
	return nil
}

// zeroRange writes zeros over units [from, to) of s.
func zeroRange(s *segment, from, to int64) error {
	const chunk = 64 << 10
	zeros := make([]byte, min((to-from)*UnitSize, chunk))
	for off, end := from*UnitSize, to*UnitSize; off < end; {
		n := min(end-off, int64(len(zeros)))
		if _, err := s.f.WriteAt(zeros[:n], off); err != nil {
			return fmt.Errorf("zero %s at %d: %w", s.path, off, err)
		}
		off += n
	}
	return nil
}

// removeSegment closes s and removes its file durably. s must already be
// detached from q.mu.segs.
func (q *Queue) removeSegment(s *segment) error {
	if err := s.close(); err != nil {
		return fmt.Errorf("close %s: %w", s.path, err)
	}
	if err := q.fs.Remove(s.path); err != nil {
		return fmt.Errorf("remove %s: %w", s.path, err)
	}
	if err := q.fs.SyncDir(q.dir); err != nil {
		return fmt.Errorf("sync dir %s: %w", q.dir, err)
	}
	return nil
}

// checkInvariants verifies the documented invariants of q.mu; tests call it.
func (q *Queue) checkInvariants() error {
	q.mu.RLock()
	defer q.mu.RUnlock()
	segs, lo, hi := q.mu.segs, q.mu.min, q.mu.max
	if len(segs) == 0 {
		if q.mu.closed || lo == hi && hi == 0 {
			return nil
		}
		return fmt.Errorf("no files but min %d max %d", lo, hi)
	}
	for i := 1; i < len(segs); i++ {
		if segs[i].base != segs[i-1].base+q.perFile {
			return fmt.Errorf("file %s does not follow %s", segs[i].path, segs[i-1].path)
		}
	}
	last := segs[len(segs)-1]
	if segs[0].base > lo || lo > hi || hi > last.base+q.perFile || hi < last.base {
		return fmt.Errorf("files [%d, %d) min %d max %d", segs[0].base, last.base+q.perFile, lo, hi)
	}
	if hi < last.base+q.perFile && !last.raw(hi-last.base).empty() {
		return fmt.Errorf("unit at max %d is written", hi)
	}
	return nil
}
