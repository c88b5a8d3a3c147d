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
	// MaxOpenFiles bounds the files (one descriptor and one mapping each)
	// kept open at once by a Set over all its queues, or by a Queue opened
	// alone with OpenQueue. Files are opened on first use and the least
	// recently used are closed beyond the bound; see "Open files" in the
	// package documentation. 0 means DefaultMaxOpenFiles (1,024); a
	// negative value means no bound.
	MaxOpenFiles int
	// OwnerSyncsFS declares that the owner makes the queues durable by
	// syncing the whole file system (vfs.FS.SyncFS), never queue by queue,
	// with this protocol:
	//
	//   - a checkpoint is Set.MarkDirty (which writes every buffered unit to
	//     the files), then SyncFS of the file system holding the queues,
	//     then Set.SyncedByFS with the marks; the checkpoint covers the
	//     units put before its MarkDirty, and only once its SyncFS returned;
	//   - the owner relies on no unit that a completed checkpoint does not
	//     cover (it records each queue's MaxOffset as of the MarkDirty, and
	//     commits that record only after the SyncFS);
	//   - after a crash, before writing to a queue, it cuts the queue back
	//     to the offset its last completed checkpoint recorded (TruncateTo;
	//     0 for a queue the checkpoint does not know), and puts the later
	//     units again.
	//
	// In return, the write path issues no sync of its own: closing a file
	// with unsynced writes to make room in the cache does not fdatasync it
	// (the page cache keeps the writes, the owner's next SyncFS covers them,
	// and the queue stays dirty until SyncedByFS says so); creating a
	// queue's directory or its first file, growing a file, and creating the
	// next file when one is full sync neither the files nor their
	// directories (but for one directory sync when a queue fills its first
	// file before a checkpoint covered that file's creation). A crash can
	// then leave states that recovery accepts only under this option; see
	// "Recovery" in the package documentation. Sync, Close, TruncateTo,
	// TruncatePhy, DeleteBefore and ResetTo still sync as documented.
	OwnerSyncsFS bool
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

// firstFileUnits is the size in units a file is created with (4,080 bytes:
// one 4 KiB block), unless it must hold more blank units or is smaller.
const firstFileUnits = 204

// growTarget returns the size in units a file of have units grows to so
// that it holds need units: it doubles, from firstFileUnits, up to perFile.
func growTarget(have, need, perFile int64) int64 {
	n := max(have, firstFileUnits)
	for n < need {
		n *= 2
	}
	return min(n, perFile)
}

// segment is one file of a queue. The file is open (h != nil) only while it
// is in the queue's file cache; see cache.go.
type segment struct {
	base int64 // queue offset of the file's first unit
	// units is the file's size in units: perFile for every file but the
	// last, which grows (see growLocked). Changed with q.w and q.mu.Lock
	// held, so either lock suffices to read it.
	units int64
	h     atomic.Pointer[handle] // the open file, or nil
	// dirty: written since the last Sync (or the SyncFS of a mark taken
	// after the write). Guarded by Queue.w. Without OwnerSyncsFS a dirty
	// segment is open: closing a file syncs it first.
	dirty bool
}

// Queue is the consume queue of one topic and queue id. See the package
// documentation for its concurrency contract.
type Queue struct {
	// The fields a put and a flush use come first, together, the hot
	// ones first in w and mu: with thousands of queues written round
	// robin each line of a queue is a cache miss, and lines next to each
	// other are fetched together.

	// w serialises the writer methods. A writer reads mu's fields holding
	// only w, and takes mu.Lock to change them.
	w struct {
		sync.Mutex
		err error // sticky: after a failed write or sync, refuse writes
		// pend holds the encoded units at offsets [mu.disk, mu.disk +
		// len(pend)/UnitSize): put, not yet written to the files. Those
		// below mu.max are visible to readers, through mu.mem, which is
		// pend[:(mu.max-mu.disk)*UnitSize] or a copy of it: the writer
		// appends to pend beyond mu.mem and rewrites bytes readers can see
		// only after replacing mu.mem under mu.Lock. See spillLocked.
		pend []byte
		// tail is the unit at endLocked()-1 when tailOK, so that a put
		// checks overlap without reading the file.
		tail   rawUnit
		tailOK bool
		// spare is a second buffer for pend, which spillLocked fills with
		// the units it keeps while readers may still read the first.
		spare []byte
		// minPhy is the PhyOffset of the unit at mu.min when minPhyOK (and
		// mu.min < mu.max), so that DeleteBefore leaves an idle queue's
		// files closed.
		minPhy   int64
		minPhyOK bool
		// firstSynced (OwnerSyncsFS only) records that the directory
		// entry of the queue's first file is durable, so that a crash
		// cannot lose that file while keeping a later one (which would
		// move MinOffset). Before creating a second file, the writer syncs
		// the directory unless it is set. firstGen counts the first files
		// created without a sync, so that SyncedByFS sets firstSynced only
		// for the first file its mark saw.
		firstSynced bool
		firstGen    uint64
		// fresh (OwnerSyncsFS only) is the descriptor of freshSeg's file,
		// which spillLocked has just created: its first growth and write
		// go through it, and spillLocked closes it before it returns, so
		// that a new file costs no second open (closeFresh).
		fresh    vfs.File
		freshSeg *segment
		// journaled is the end of the units that an owner's tail journal
		// holds (Set.MarkJournal): a record starts at the later of it
		// and mu.disk.
		journaled int64
	}

	// needSync is set by writes and cleared by Sync, so Set.SyncDirty can
	// skip clean queues without taking their locks.
	needSync atomic.Bool
	cache    *fileCache // shared by the queues of a Set
	perFile  int64      // units per file

	// mu guards what readers see.
	mu struct {
		sync.RWMutex
		// [min, max) is what readers see. Units below disk are in the
		// files; units in [disk, max) are only in memory, in mem
		// (len(mem) == (max-disk)*UnitSize). Invariant: min <= disk <=
		// max; len(segs) == 0 implies min == disk == 0; otherwise
		// segs[0].base <= min and segs[len-1].base <= disk <=
		// segs[len-1].base + segs[len-1].units.
		min, max int64
		disk     int64
		mem      []byte
		// segs are the files in order, contiguous: segs[i+1].base ==
		// segs[i].base + perFile.
		segs   []*segment
		closed bool
	}

	fs       vfs.FS
	root     string // the Set's root: the queue's directory is dir()
	topic    string
	queueID  int32
	fileSize int64 // bytes per file
	log      *slog.Logger
	// ownerSyncs is Options.OwnerSyncsFS.
	ownerSyncs bool

	// writes counts the writes to the queue's files (under w), so that an
	// owner syncing the whole file system knows which queues it covered
	// (Set.MarkDirty, Set.SyncedByFS).
	writes atomic.Uint64

	// openMu serialises the opening of files by readers (which hold only
	// mu.RLock) and the writer.
	openMu sync.Mutex

	// segs0 backs mu.segs while the queue has one file, and seg0 is a
	// segment of it when seg0Used, so that a queue of one file costs no
	// heap object for its list of files or its file beyond the Queue: the
	// collector marks every object of every open queue in each cycle. seg0
	// is set up only while no reader can reach it (it is in no mu.segs) and
	// freed (removeSegment) once detached and closed. seg0Used is guarded
	// by w.
	segs0    [1]*segment
	seg0     segment
	seg0Used bool
}

// OpenQueue opens the queue of topic/queueID under root, creating its
// directory if needed, and recovers MaxOffset from its files. The queue has
// a file cache of its own (Options.MaxOpenFiles); the queues of a Set share
// the Set's.
func OpenQueue(fs vfs.FS, root, topic string, queueID int32, opts Options) (*Queue, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	return openQueueIn(fs, root, topic, queueID, opts, newFileCache(opts.MaxOpenFiles, opts.OwnerSyncsFS))
}

func openQueueIn(fs vfs.FS, root, topic string, queueID int32, opts Options, cache *fileCache) (*Queue, error) {
	if err := checkName(topic, queueID); err != nil {
		return nil, err
	}
	q := &Queue{
		fs:       fs,
		root:     root,
		topic:    topic,
		queueID:  queueID,
		perFile:  int64(opts.UnitsPerFile),
		fileSize: int64(opts.UnitsPerFile) * UnitSize,
		log:      opts.Logger,
		cache:    cache,

		ownerSyncs: opts.OwnerSyncsFS,
	}
	mkdir := mkdirDurable
	if q.ownerSyncs {
		// The owner's next SyncFS covers the directories; a crash before
		// it loses the queue only with units no checkpoint covers.
		mkdir = func(fs vfs.FS, dir string) error { return fs.MkdirAll(dir, vfs.DirMode) }
	}
	q.mu.segs = q.segs0[:0]
	if err := mkdir(fs, q.dir()); err != nil {
		return nil, fmt.Errorf("consumequeue: open %s: %w", q.name(), err)
	}
	// The locks keep evictions away from the files load has open.
	q.w.Lock()
	q.mu.Lock()
	err := q.load()
	if err != nil {
		for _, s := range q.mu.segs {
			if h := s.h.Load(); h != nil {
				_ = q.closeHandle(h) // the load error is the one to report
			}
		}
		q.mu.segs = nil
	}
	if err == nil && q.ownerSyncs {
		// The writer opens no file into the cache (see writeUnits): the
		// file recovery read stays closed until a reader needs it.
		err = q.closeFilesLocked()
	}
	q.mu.Unlock()
	q.w.Unlock()
	if err != nil {
		return nil, fmt.Errorf("consumequeue: open %s: %w", q.name(), err)
	}
	cache.maybeEvict()
	return q, nil
}

// warn logs a recovery or eviction warning about the queue. The queue's
// attributes are added here rather than bound to a logger per queue, which
// would cost memory in every idle queue.
func (q *Queue) warn(msg string, args ...any) {
	q.log.Warn(msg, append([]any{"topic", q.topic, "queue", q.queueID}, args...)...)
}

// dir returns the queue's directory, <root>/<topic>/<queueId>. It is
// built when needed (file operations) rather than kept, as a Set may hold
// many queues.
func (q *Queue) dir() string {
	return vfs.Join(q.root, q.topic, strconv.Itoa(int(q.queueID)))
}

// path returns the path of s's file.
func (q *Queue) path(s *segment) string {
	return vfs.Join(q.dir(), fileName(s.base*UnitSize))
}

// closeFilesLocked closes the queue's open files, dirty ones as they are:
// for OwnerSyncsFS only, whose SyncFS covers them. The caller holds q.w and
// q.mu.Lock.
func (q *Queue) closeFilesLocked() error {
	var errs []error
	for _, s := range q.mu.segs {
		if h := s.h.Load(); h != nil {
			if err := q.closeHandle(h); err != nil {
				errs = append(errs, fmt.Errorf("close %s: %w", q.path(s), err))
			}
		}
	}
	return errors.Join(errs...)
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
	if err := fs.MkdirAll(dir, vfs.DirMode); err != nil {
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
	q.mu.Lock()
	segs := q.mu.segs
	q.mu.segs, q.mu.closed = nil, true
	q.mu.mem = nil // readers check closed first
	for _, s := range segs {
		if h := s.h.Load(); h != nil {
			if err := q.closeHandle(h); err != nil {
				errs = append(errs, fmt.Errorf("close %s: %w", q.path(s), err))
			}
		}
	}
	q.mu.Unlock()
	q.w.pend, q.w.spare = nil, nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("consumequeue: close %s: %w", q.name(), err)
	}
	return nil
}

// load finds the queue's files and recovers min and max. The caller holds
// q.w and q.mu.Lock.
func (q *Queue) load() error {
	dir := q.dir()
	names, err := q.fs.List(dir)
	if err != nil {
		return fmt.Errorf("list %q: %w", dir, err)
	}
	var (
		sizes  []int64
		listed int        // queue files found
		stale  []*segment // files after a gap (OwnerSyncsFS)
	)
	for _, name := range names {
		off, ok := parseFileName(name)
		if !ok {
			q.log.Debug("consumequeue: ignoring file", "file", vfs.Join(dir, name))
			continue
		}
		listed++
		path := vfs.Join(dir, name)
		if off%q.fileSize != 0 {
			return fmt.Errorf("file %s: name is not a multiple of the file size %d (UnitsPerFile %d): %w",
				path, q.fileSize, q.perFile, ErrCorrupt)
		}
		base := off / UnitSize
		if n := len(q.mu.segs); stale != nil || n > 0 && base != q.mu.segs[n-1].base+q.perFile {
			if !q.ownerSyncs {
				return fmt.Errorf("file %s: missing file before it (expected %s): %w",
					path, fileName((q.mu.segs[n-1].base+q.perFile)*UnitSize), ErrCorrupt)
			}
			// The missing file was created after the last SyncFS began,
			// and so was every later one: no checkpoint covers their units.
			stale = append(stale, &segment{base: base})
			continue
		}
		fi, err := q.fs.Stat(path)
		if err != nil {
			return fmt.Errorf("stat %s: %w", path, err)
		}
		size := fi.Size()
		if size > q.fileSize {
			return fmt.Errorf("file %s: size %d, want %d (UnitsPerFile %d): %w",
				path, size, q.fileSize, q.perFile, ErrCorrupt)
		}
		q.mu.segs = append(q.mu.segs, q.newSegment(base, size/UnitSize))
		sizes = append(sizes, size)
	}
	// A second file exists only once the first one's entry is durable.
	q.w.firstSynced = listed >= 2
	for i := len(stale) - 1; i >= 0; i-- {
		q.warn("consumequeue: removing a file that follows a missing one (created after the last checkpoint)",
			"file", q.path(stale[i]))
		if err := q.removeSegment(stale[i]); err != nil {
			return err
		}
	}
	if err := q.dropEmptyTail(); err != nil {
		return err
	}
	segs := q.mu.segs
	if len(segs) == 0 {
		return nil
	}
	for i, s := range segs[:len(segs)-1] {
		if sizes[i] == q.fileSize {
			continue
		}
		if !q.ownerSyncs {
			return fmt.Errorf("file %s: size %d, want %d (UnitsPerFile %d): %w",
				q.path(s), sizes[i], q.fileSize, q.perFile, ErrCorrupt)
		}
		// The file was not full when the last SyncFS began: no checkpoint
		// covers a unit after it.
		if err := q.cutAfter(i, "short file", "size", sizes[i]); err != nil {
			return err
		}
		break
	}
	segs = q.mu.segs
	last := segs[len(segs)-1]
	if size := sizes[len(segs)-1]; size%UnitSize != 0 {
		// The end of an unsynced write past the file's old size, torn by
		// a crash that lost the growth before it.
		q.warn("consumequeue: cutting a partial unit off the end of the last file",
			"file", q.path(last), "size", size)
		h, err := q.file(last)
		if err != nil {
			return err
		}
		if err := h.f.Truncate(last.units * UnitSize); err != nil {
			return fmt.Errorf("truncate %s: %w", q.path(last), err)
		}
		if err := h.f.Sync(); err != nil {
			return fmt.Errorf("sync %s: %w", q.path(last), err)
		}
	}
	return q.recover()
}

// cutAfter removes the files after segs[i] (OwnerSyncsFS only): a crash
// left them behind an incomplete file, so they hold only units that no
// checkpoint covers. segs[i] becomes the last file. The caller holds q.w
// and q.mu.Lock.
func (q *Queue) cutAfter(i int, why string, args ...any) error {
	segs := q.mu.segs
	q.warn("consumequeue: removing the files after an incomplete one (written after the last checkpoint)",
		append([]any{"file", q.path(segs[i]), "reason", why, "removed", len(segs) - i - 1}, args...)...)
	q.mu.segs = segs[: i+1 : i+1]
	for j := len(segs) - 1; j > i; j-- {
		if err := q.removeSegment(segs[j]); err != nil {
			return err
		}
	}
	return nil
}

// corruptAt describes corruption of the unit at index i of s.
func (q *Queue) corruptAt(s *segment, i int64, format string, args ...any) error {
	return fmt.Errorf("file %s byte %d (queue offset %d): %s: %w",
		q.path(s), i*UnitSize, s.base+i, fmt.Sprintf(format, args...), ErrCorrupt)
}

// recover sets min and max from the loaded files; see "Recovery" in the
// package documentation. It leaves only the last file open.
func (q *Queue) recover() error {
	segs := q.mu.segs
	first := segs[0]
	fh, err := q.file(first)
	if err != nil {
		return err
	}
	blanks := int64(0)
	for fr := newRecoveryReader(fh); blanks < q.perFile; blanks++ {
		u, err := fr.unit(blanks)
		if err != nil {
			return err
		}
		if !u.blank() {
			break
		}
	}
	q.mu.min = first.base + blanks
	var prev rawUnit // last valid unit seen
	for i := 0; i < len(segs)-1; i++ {
		s := segs[i]
		h, err := q.file(s)
		if err != nil {
			return err
		}
		lo := int64(0)
		if i == 0 {
			lo = min(blanks, q.perFile-1) // an all-blank file fails below
		}
		checks := []int64{lo, q.perFile - 1}
		if lo == q.perFile-1 {
			checks = checks[:1] // one unit after the blanks: check it once
		}
		p, complete := prev, true
		var lu rawUnit // the unit at lo
		for k, j := range checks {
			u, err := h.readUnit(j)
			if err != nil {
				return err
			}
			if k == 0 {
				lu = u
			}
			if q.ownerSyncs && u.empty() {
				// Not written when the last SyncFS began: no checkpoint
				// covers a unit from here on.
				complete = false
				break
			}
			if !u.valid() {
				return q.corruptAt(s, j, "invalid unit %v in a complete file", u)
			}
			if u.phy < p.end() {
				return q.corruptAt(s, j, "unit %v overlaps earlier unit %v", u, p)
			}
			p = u
		}
		if !complete {
			if err := q.cutAfter(i, "unwritten unit in a full file"); err != nil {
				return err
			}
			segs = q.mu.segs
			break // s is the last file now
		}
		prev = p
		if s.base+lo == q.mu.min {
			q.w.minPhy, q.w.minPhyOK = lu.phy, true
		}
		// Complete files are read again only when asked for.
		if err := q.closeHandle(h); err != nil {
			return fmt.Errorf("close %s: %w", q.path(s), err)
		}
	}
	last := segs[len(segs)-1]
	h, err := q.file(last)
	if err != nil {
		return err
	}
	i := int64(0)
	if len(segs) == 1 {
		i = blanks
	}
	lr := newRecoveryReader(h)
	for ; i < last.units; i++ {
		u, err := lr.unit(i)
		if err != nil {
			return err
		}
		if u.empty() {
			break
		}
		if !u.valid() {
			return q.corruptAt(last, i, "invalid unit %v", u)
		}
		if u.phy < prev.end() {
			return q.corruptAt(last, i, "unit %v overlaps previous unit %v", u, prev)
		}
		if last.base+i == q.mu.min {
			q.w.minPhy, q.w.minPhyOK = u.phy, true
		}
		prev = u
	}
	q.mu.max = last.base + i
	q.mu.disk = q.mu.max
	if q.mu.max > q.mu.min {
		q.w.tail, q.w.tailOK = prev, true
	}
	return q.zeroStale(last, h, i)
}

// dropEmptyTail removes trailing files without a unit that follow an
// incomplete file: a crash after creating them, before any unit in them
// became durable, and after units of the previous file were lost. Units
// beyond the end of a short file read as zero.
func (q *Queue) dropEmptyTail() error {
	for n := len(q.mu.segs); n > 1; n = len(q.mu.segs) {
		last, prev := q.mu.segs[n-1], q.mu.segs[n-2]
		lh, err := q.file(last)
		if err != nil {
			return err
		}
		ph, err := q.file(prev)
		if err != nil {
			return err
		}
		lu, err := lh.readUnit(0)
		if err != nil {
			return err
		}
		pu, err := ph.readUnit(q.perFile - 1)
		if err != nil {
			return err
		}
		if !lu.empty() || !pu.empty() {
			return q.closeHandle(ph)
		}
		q.warn("consumequeue: removing empty file after an incomplete one", "file", q.path(last))
		q.mu.segs = q.mu.segs[:n-1]
		if err := q.removeSegment(last); err != nil {
			return err
		}
	}
	return nil
}

// zeroStale zeroes the units of s from index i on if any byte there is not
// zero: unsynced writes a crash reordered or tore. Left in place they could
// reappear behind later writes. It reads the tail with ReadAt (see
// recoveryReader) and writes zeros only over the pages that hold a byte
// other than zero: those pages are allocated already, so zeroing them
// needs no space on a full device, and the holes stay holes.
func (q *Queue) zeroStale(s *segment, h *handle, i int64) error {
	from, size := i*UnitSize, int64(len(h.data))
	var dirty [][2]int64 // byte ranges to zero, in order, page-aligned inside [from, size)
	last := int64(-1)    // offset of the last byte that is not zero
	buf := make([]byte, min(size-from, zeroChunk))
	for off := from; off < size; {
		// Chunks start on a page boundary after the first.
		n := min(size-off, zeroChunk-off%zeroPage)
		b := buf[:n]
		if err := h.readAt(b, off); err != nil {
			return err
		}
		for p := int64(0); p < n; {
			pe := min(n, p+zeroPage-(off+p)%zeroPage) // end of the page in b
			if nz := lastNonZero(b[p:pe]); nz >= 0 {
				last = off + p + int64(nz)
				if k := len(dirty) - 1; k >= 0 && dirty[k][1] == off+p {
					dirty[k][1] = off + pe
				} else {
					dirty = append(dirty, [2]int64{off + p, off + pe})
				}
			}
			p = pe
		}
		off += n
	}
	if last < 0 {
		return nil
	}
	units := (last + 1 - from + UnitSize - 1) / UnitSize
	q.warn("consumequeue: zeroing units after the end of the written units (unsynced writes of a crash)",
		"file", q.path(s), "offset", s.base+i, "units", units)
	for _, r := range dirty {
		if err := q.zeroBytes(s, h, r[0], r[1]); err != nil {
			return err
		}
	}
	if err := h.f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", q.path(s), err)
	}
	return nil
}

// zeroPage is the granularity at which zeroStale skips holes: the page
// size of the architectures we run on (a larger page only makes it write
// zeros over more holes). zeroChunk, a multiple of it, is what it reads at
// once.
const (
	zeroPage  = 4096
	zeroChunk = 16 * zeroPage
)

// lastNonZero returns the index of the last byte of b that is not zero, or -1.
func lastNonZero(b []byte) int {
	for n := len(b) - 1; n >= 0; n-- {
		if b[n] != 0 {
			return n
		}
	}
	return -1
}

// zeroRange writes zeros over units [from, to) of s, which has them.
func (q *Queue) zeroRange(s *segment, h *handle, from, to int64) error {
	return q.zeroBytes(s, h, from*UnitSize, to*UnitSize)
}

// zeroBytes writes zeros over bytes [off, end) of s's file.
func (q *Queue) zeroBytes(s *segment, h *handle, off, end int64) error {
	const chunk = 64 << 10
	zeros := make([]byte, min(end-off, chunk))
	for off < end {
		n := min(end-off, int64(len(zeros)))
		if _, err := h.f.WriteAt(zeros[:n], off); err != nil {
			return fmt.Errorf("zero %s at %d: %w", q.path(s), off, err)
		}
		off += n
	}
	return nil
}

// newSegment returns a segment of base and units: seg0 if it is free,
// else a new one. The caller holds q.w; no reader can reach the segment
// before the caller adds it to q.mu.segs (under q.mu.Lock).
func (q *Queue) newSegment(base, units int64) *segment {
	if q.seg0Used {
		return &segment{base: base, units: units}
	}
	q.seg0Used = true
	s := &q.seg0
	s.base, s.units, s.dirty = base, units, false
	s.h.Store(nil)
	return s
}

// freeSegment makes s available to newSegment again if it is seg0. s is
// detached from q.mu.segs and its file closed; the caller holds q.w.
func (q *Queue) freeSegment(s *segment) {
	if s == &q.seg0 {
		q.seg0Used = false
	}
}

// removeSegment closes s and removes its file durably. s must already be
// detached from q.mu.segs; the caller holds q.w.
func (q *Queue) removeSegment(s *segment) error {
	if h := s.h.Load(); h != nil {
		if err := q.closeHandle(h); err != nil {
			return fmt.Errorf("close %s: %w", q.path(s), err)
		}
	}
	defer q.freeSegment(s)
	if err := q.fs.Remove(q.path(s)); err != nil {
		return fmt.Errorf("remove %s: %w", q.path(s), err)
	}
	if err := q.fs.SyncDir(q.dir()); err != nil {
		return fmt.Errorf("sync dir %s: %w", q.dir(), err)
	}
	q.w.firstSynced = true // every entry of the directory is durable
	return nil
}

// checkInvariants verifies the documented invariants of q.mu; tests call it.
func (q *Queue) checkInvariants() error {
	q.mu.RLock()
	defer q.mu.RUnlock()
	segs, lo, disk, hi := q.mu.segs, q.mu.min, q.mu.disk, q.mu.max
	if q.mu.closed {
		return nil
	}
	if lo > disk || disk > hi {
		return fmt.Errorf("min %d disk %d max %d", lo, disk, hi)
	}
	if int64(len(q.mu.mem)) != (hi-disk)*UnitSize {
		return fmt.Errorf("%d bytes in memory for units [%d, %d)", len(q.mu.mem), disk, hi)
	}
	if len(segs) == 0 {
		if lo == 0 && disk == 0 {
			return nil
		}
		return fmt.Errorf("no files but min %d disk %d", lo, disk)
	}
	for i := 1; i < len(segs); i++ {
		if segs[i].base != segs[i-1].base+q.perFile {
			return fmt.Errorf("file %s does not follow %s", q.path(segs[i]), q.path(segs[i-1]))
		}
		if segs[i-1].units != q.perFile {
			return fmt.Errorf("file %s has %d units, not %d", q.path(segs[i-1]), segs[i-1].units, q.perFile)
		}
	}
	last := segs[len(segs)-1]
	if segs[0].base > lo || disk > last.base+last.units || disk < last.base || last.units > q.perFile {
		return fmt.Errorf("files [%d, %d) (last %d units) min %d disk %d",
			segs[0].base, last.base+q.perFile, last.units, lo, disk)
	}
	if h := last.h.Load(); h != nil {
		u, err := h.readUnit(disk - last.base)
		if err != nil {
			return err
		}
		if !u.empty() {
			return fmt.Errorf("unit at the end of the files %d is written", disk)
		}
	}
	return nil
}
