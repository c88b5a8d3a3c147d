package index

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"sync"

	"github.com/raftmq/raftmq/internal/vfs"
)

// Defaults are RocketMQ's (MessageStoreConfig maxHashSlotNum, maxIndexNum,
// maxMsgsNumBatch).
const (
	DefaultSlotCount   = 5_000_000
	DefaultMaxEntries  = 20_000_000
	DefaultMaxQueryNum = 64
)

// ErrInvalid is matched (errors.Is) by errors about a caller's arguments or
// options; nothing was written.
var ErrInvalid = errors.New("index: invalid argument")

// Options configure an Index. The zero value means RocketMQ's defaults.
// SlotCount and MaxEntries fix the file layout: an index must be reopened
// with the values it was created with.
type Options struct {
	// SlotCount is the number of hash slots per file (default 5,000,000).
	SlotCount int
	// MaxEntries is the number of 20-byte entry positions per file,
	// including the unused position 0, so a file holds MaxEntries-1 entries
	// (default 20,000,000). At least 2.
	MaxEntries int
	// MaxQueryNum caps Query's maxNum (default 64, RocketMQ's
	// maxMsgsNumBatch).
	MaxQueryNum int
	// Logger receives the index's log lines (default: discarded).
	Logger *slog.Logger
}

func (o Options) withDefaults() (Options, error) {
	if o.SlotCount == 0 {
		o.SlotCount = DefaultSlotCount
	}
	if o.MaxEntries == 0 {
		o.MaxEntries = DefaultMaxEntries
	}
	if o.MaxQueryNum == 0 {
		o.MaxQueryNum = DefaultMaxQueryNum
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case o.SlotCount < 1 || o.SlotCount > math.MaxInt32:
		return o, fmt.Errorf("index: SlotCount %d outside [1, MaxInt32]: %w", o.SlotCount, ErrInvalid)
	case o.MaxEntries < 2 || o.MaxEntries > math.MaxInt32:
		return o, fmt.Errorf("index: MaxEntries %d outside [2, MaxInt32]: %w", o.MaxEntries, ErrInvalid)
	case o.MaxQueryNum < 0:
		return o, fmt.Errorf("index: MaxQueryNum %d is negative: %w", o.MaxQueryNum, ErrInvalid)
	}
	g := geometry{slotCount: int32(o.SlotCount), maxEntries: int32(o.MaxEntries)}
	if uint64(g.fileSize()) > uint64(math.MaxInt) {
		return o, fmt.Errorf("index: file size %d does not fit in memory: %w", g.fileSize(), ErrInvalid)
	}
	return o, nil
}

// Checkpoint is the active file and its indexCount at a moment when every
// entry up to it was durable. The caller persists it (with its own applied
// position) and hands it to Recover after an unclean stop. The zero value
// means "nothing synced".
type Checkpoint struct {
	File  string // base name of the active file
	Count int32  // its indexCount: entries 1..Count-1 are durable
}

// FileInfo describes one index file: its name and header.
type FileInfo struct {
	Name           string
	BeginTimestamp int64
	EndTimestamp   int64
	BeginPhyOffset int64
	EndPhyOffset   int64
	HashSlotCount  int32
	IndexCount     int32
}

// file is one open index file.
type file struct {
	name string // base name, yyyyMMddHHmmssSSS
	path string
	f    vfs.File
	m    vfs.Mapping // nil while incomplete
	b    []byte      // m.Bytes(): the whole file, read-only; entries are read here, slots never
	// slots is the slot table in memory, for a file that is not full (the
	// active one): loaded with ReadAt by scanSlots, zeros for a new file,
	// holding the file's slots with the buffered heads (pendPages) put
	// over them, dropped when the file is sealed. The slot table is mostly holes in a sparse file, and
	// a read of a hole through a mapping allocates a page on some file
	// systems (tmpfs), which on a full device is a SIGBUS; so slots are
	// read from here, or with ReadAt (which reads holes as zeros without
	// allocating), never through the mapping. Written under Index.mu.
	slots []byte
	// hdr is the header as the index sees it. For the active file it runs
	// ahead of the header on disk, which is written only by Sync, Close and
	// sealing. Written by the writer under Index.mu; read by queries under
	// Index.mu.RLock.
	hdr header
	// incomplete is set when Open found this file cut short by a crash (an
	// all-zero header or a short size); such a file is not mapped.
	incomplete *CorruptError
	// debris is set when Open found slots pointing at or beyond indexCount:
	// unsynced writes that survived a crash the header did not.
	debris *CorruptError

	// The write buffer: what Put added and flushPending has not written
	// yet. Only the active file has any. Written by the writer under
	// Index.mu; read by queries under Index.mu.RLock and by the writer
	// without locking.
	//
	// Invariant: pendFirst + len(pendEnts)/entrySize == hdr.indexCount.
	// Entries pendFirst .. indexCount-1 are encoded in pendEnts and not in
	// the file. A slot whose head Put changed holds the new head in slots
	// (never in the file alone), and the bit of its 4 KiB page of the
	// file (file offset / slotPageSize) is set in pendPages: the file
	// does not have the page's slots yet. Every other entry and slot in
	// the file is current. One bit per page instead of a map entry per
	// slot: a Put costs no map insert, a lookup reads only slots, and
	// flushPending writes the marked pages straight from slots (a page
	// with one changed slot was written whole before too, in a merged run).
	pendFirst int32
	pendEnts  []byte
	pendPages []uint64
}

// slotPageSize is the unit in which buffered slot heads are marked and
// written: a page of the file.
const slotPageSize = 4096

// pendingSlots reports whether any slot holds a buffered head.
func (f *file) pendingSlots() bool {
	return slices.ContainsFunc(f.pendPages, func(w uint64) bool { return w != 0 })
}

// pendPage marks slot's page of the file as holding a buffered head.
func (f *file) pendPage(g geometry, slot int32) {
	p := g.slotOffset(slot) / slotPageSize
	if f.pendPages == nil {
		f.pendPages = make([]uint64, (g.slotOffset(g.slotCount-1)/slotPageSize)/64+1)
	}
	f.pendPages[p>>6] |= 1 << (p & 63)
}

// slotHead returns the current head of slot: from the in-memory table
// (which holds the buffered heads), else read with ReadAt from a file that
// buffers none (0, an empty chain, if that fails).
func (f *file) slotHead(g geometry, slot int32) int32 {
	off := g.slotOffset(slot)
	if f.slots != nil {
		return int32(binary.BigEndian.Uint32(f.slots[off-headerSize:]))
	}
	var b [slotSize]byte
	if _, err := f.f.ReadAt(b[:], off); err != nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(b[:]))
}

// entryBytes returns the encoded entry ordinal, which is below
// hdr.indexCount: buffered, or from the file.
func (f *file) entryBytes(g geometry, ordinal int32) []byte {
	if ordinal >= f.pendFirst {
		return f.pendEnts[int(ordinal-f.pendFirst)*entrySize:]
	}
	return f.b[g.entryOffset(ordinal):]
}

// resetPending empties the write buffer of a file whose entries and slots
// are all in the file, as after Open or Recover. Callers hold the write lock
// (or own f alone).
func (f *file) resetPending() {
	f.pendFirst = f.hdr.indexCount
	f.pendEnts = f.pendEnts[:0]
	clear(f.pendPages)
}

// Index is a directory of index files. See the package documentation for
// the format and the concurrency contract.
type Index struct {
	fs       vfs.FS
	dir      string
	geo      geometry
	maxQuery int
	log      *slog.Logger

	// Writer-owned: touched only by the writer goroutine.
	werr     error   // sticky: the first failed write or sync; refuses further writes
	unsynced []*file // sealed files whose data is not yet fsynced
	dirDirty bool    // files created or removed since the last SyncDir
	// Scratch of flushPending, kept to avoid allocating per flush.

	mu struct {
		sync.RWMutex
		// files are sorted by name, oldest first; the last is the active
		// file. The writer changes the slice and the files' hdr and mappings
		// under the write lock, and reads them without locking (it is the
		// only mutator).
		files []*file
		// broken is non-nil while incomplete files await Recover.
		broken error
		closed bool
	}
}

// Open loads the index files in dir, creating dir if needed. It checks each
// file's size and header and the order of the files' physical offsets, and
// returns a *CorruptError (errors.Is ErrCorrupt) naming the file and offset
// of the first inconsistency. Crash debris — files with an all-zero header or
// a short size, slots pointing beyond their file's entries — does not fail
// Open, but writes and queries return ErrNeedsRecover until Recover runs.
// Names that are not 17 digits are ignored.
func Open(fs vfs.FS, dir string, opts Options) (*Index, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := fs.MkdirAll(dir, vfs.DirMode); err != nil {
		return nil, fmt.Errorf("index: create %q: %w", dir, err)
	}
	names, err := fs.List(dir)
	if err != nil {
		return nil, fmt.Errorf("index: list %q: %w", dir, err)
	}
	x := &Index{
		fs:       fs,
		dir:      dir,
		geo:      geometry{slotCount: int32(opts.SlotCount), maxEntries: int32(opts.MaxEntries)},
		maxQuery: opts.MaxQueryNum,
		log:      opts.Logger,
	}
	for _, name := range names {
		if _, ok := parseFileName(name); !ok {
			x.log.Warn("index: ignoring file with a foreign name", "dir", dir, "name", name)
			continue
		}
		f, err := x.openFile(name)
		if err != nil {
			x.closeAll()
			return nil, err
		}
		x.mu.files = append(x.mu.files, f)
		for _, d := range []*CorruptError{f.incomplete, f.debris} {
			if d == nil {
				continue
			}
			x.log.Warn("index: crash debris; writes and queries wait for Recover", "file", d.File, "offset", d.Offset, "reason", d.Reason)
			if x.mu.broken == nil {
				x.mu.broken = d
			}
		}
	}
	if err := x.checkOrder(); err != nil {
		x.closeAll()
		return nil, err
	}
	return x, nil
}

// openFile opens, checks and maps one file.
func (x *Index) openFile(name string) (*file, error) {
	path := vfs.Join(x.dir, name)
	f, err := x.fs.OpenReadWrite(path)
	if err != nil {
		return nil, fmt.Errorf("index: open %q: %w", path, err)
	}
	fl := &file{name: name, path: path, f: f}
	if err := x.loadFile(fl); err != nil {
		fl.close()
		return nil, err
	}
	fl.resetPending()
	return fl, nil
}

func (x *Index) loadFile(fl *file) error {
	want := x.geo.fileSize()
	size, err := fl.f.Size()
	if err != nil {
		return fmt.Errorf("index: size of %q: %w", fl.path, err)
	}
	if size > want {
		return corruptf(fl.path, want, "file is %d bytes, want %d (SlotCount %d, MaxEntries %d: were the options changed?)",
			size, want, x.geo.slotCount, x.geo.maxEntries)
	}
	hb, err := readHeaderBytes(fl.f, size)
	if err != nil {
		return fmt.Errorf("index: read header of %q: %w", fl.path, err)
	}
	fl.hdr = decodeHeader(hb)
	if fl.hdr == (header{}) {
		fl.incomplete = &CorruptError{File: fl.path, Offset: offIndexCount, needsRecover: true,
			Reason: "header is all zeros (never synced)"}
		return nil
	}
	if err := x.checkHeader(fl.path, fl.name, fl.hdr); err != nil {
		return err
	}
	if size < want {
		fl.incomplete = &CorruptError{File: fl.path, Offset: size, needsRecover: true,
			Reason: fmt.Sprintf("file is %d bytes, want %d (SlotCount %d, MaxEntries %d)",
				size, want, x.geo.slotCount, x.geo.maxEntries)}
		return nil
	}
	if err := x.mapFile(fl); err != nil {
		return err
	}
	if fl.hdr.indexCount < x.geo.maxEntries {
		return x.scanSlots(fl)
	}
	return nil
}

// scanSlots loads the slot table of a file that is not full into memory
// (file.slots), with ReadAt, and checks it. A slot at or beyond indexCount
// is crash debris (the slot write survived, the header write did not); a
// negative one is corruption.
func (x *Index) scanSlots(fl *file) error {
	tbl := make([]byte, int64(x.geo.slotCount)*slotSize)
	if _, err := fl.f.ReadAt(tbl, headerSize); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("index: read slots of %q: %w", fl.path, err)
	}
	fl.slots = tbl
	for s := int32(0); s < x.geo.slotCount; s++ {
		off := x.geo.slotOffset(s)
		v := int32(binary.BigEndian.Uint32(tbl[off-headerSize:]))
		if v < 0 {
			return corruptf(fl.path, off, "slot %d holds negative entry %d", s, v)
		}
		if v >= fl.hdr.indexCount && fl.debris == nil {
			fl.debris = &CorruptError{File: fl.path, Offset: off, needsRecover: true,
				Reason: fmt.Sprintf("slot %d points to entry %d, not below indexCount %d (unsynced writes survived a crash)",
					s, v, fl.hdr.indexCount)}
		}
	}
	return nil
}

// readHeaderBytes reads the header, or as much of it as the file holds; the
// rest reads as zeros.
func readHeaderBytes(f vfs.File, size int64) ([]byte, error) {
	hb := make([]byte, headerSize)
	n := int64(headerSize)
	if size < n {
		n = size
	}
	if n == 0 {
		return hb, nil
	}
	if _, err := f.ReadAt(hb[:n], 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return hb, nil
}

func (x *Index) mapFile(fl *file) error {
	m, err := fl.f.Map(x.geo.fileSize())
	if err != nil {
		return fmt.Errorf("index: map %q: %w", fl.path, err)
	}
	if int64(len(m.Bytes())) != x.geo.fileSize() {
		m.Close()
		return fmt.Errorf("index: map %q: got %d bytes, want %d: %w", fl.path, len(m.Bytes()), x.geo.fileSize(), ErrInvalid)
	}
	fl.m, fl.b = m, m.Bytes()
	return nil
}

// checkHeader reports the first header field that no sequence of Puts could
// have produced.
func (x *Index) checkHeader(path, name string, h header) error {
	if h.indexCount < firstOrdinal || h.indexCount > x.geo.maxEntries {
		return corruptf(path, offIndexCount, "indexCount %d outside [1, %d]", h.indexCount, x.geo.maxEntries)
	}
	if h.indexCount == firstOrdinal {
		if h != (header{indexCount: firstOrdinal}) {
			return corruptf(path, offBeginTimestamp, "empty file (indexCount 1) has non-zero header fields")
		}
		return nil
	}
	if maxUsed := min(x.geo.slotCount, h.indexCount-1); h.hashSlotCount < 1 || h.hashSlotCount > maxUsed {
		return corruptf(path, offHashSlotCount, "hashSlotCount %d outside [1, %d]", h.hashSlotCount, maxUsed)
	}
	if h.beginTimestamp < 0 {
		return corruptf(path, offBeginTimestamp, "beginTimestamp %d is negative", h.beginTimestamp)
	}
	if h.endTimestamp < h.beginTimestamp {
		return corruptf(path, offEndTimestamp, "endTimestamp %d before beginTimestamp %d", h.endTimestamp, h.beginTimestamp)
	}
	if h.beginPhyOffset < 0 {
		return corruptf(path, offBeginPhyOffset, "beginPhyOffset %d is negative", h.beginPhyOffset)
	}
	if h.endPhyOffset < h.beginPhyOffset {
		return corruptf(path, offEndPhyOffset, "endPhyOffset %d below beginPhyOffset %d", h.endPhyOffset, h.beginPhyOffset)
	}
	if ms, _ := parseFileName(name); ms < h.beginTimestamp {
		return corruptf(path, offBeginTimestamp, "beginTimestamp %d is after the file's name time %d", h.beginTimestamp, ms)
	}
	return nil
}

// checkOrder checks that the files' physical offset ranges ascend with their
// names. Every header ever written satisfies it, crash or not.
func (x *Index) checkOrder() error {
	var prev *file
	for _, f := range x.mu.files {
		if f.hdr.indexCount <= firstOrdinal {
			continue
		}
		if prev != nil && f.hdr.beginPhyOffset < prev.hdr.endPhyOffset {
			return corruptf(f.path, offBeginPhyOffset, "beginPhyOffset %d below endPhyOffset %d of %s",
				f.hdr.beginPhyOffset, prev.hdr.endPhyOffset, prev.name)
		}
		prev = f
	}
	return nil
}

// active returns the newest file, or nil. Writer only.
func (x *Index) active() *file {
	if n := len(x.mu.files); n > 0 {
		return x.mu.files[n-1]
	}
	return nil
}

// lastPhyOffset returns the physical offset of the newest entry, or -1.
// Writer only.
func (x *Index) lastPhyOffset() int64 {
	for i := len(x.mu.files) - 1; i >= 0; i-- {
		if h := x.mu.files[i].hdr; h.indexCount > firstOrdinal {
			return h.endPhyOffset
		}
	}
	return -1
}

// checkWritable returns the error that refuses a write, if any. Writer only.
func (x *Index) checkWritable() error {
	switch {
	case x.mu.closed:
		return ErrClosed
	case x.werr != nil:
		return x.werr
	case x.mu.broken != nil:
		return x.mu.broken
	}
	return nil
}

// fail makes err sticky and returns it.
func (x *Index) fail(err error) error {
	if x.werr == nil {
		x.werr = err
	}
	return err
}

// Put indexes key (built by the caller as topic + "#" + key) at the
// message's physical offset and store timestamp (ms since the Unix epoch).
// Physical offsets must not decrease from one Put to the next; several keys
// of one message share its offset. When the active file is full, Put seals
// it (writes its header; Sync makes it durable) and starts a new file. After
// a failed write every later write returns the same error.
//
// Put writes nothing to the file itself: the entry and the new slot head
// join a write buffer, which Query reads as if it were written, and which
// Flush, Sync, Close and sealing write (see "Writing" in the package
// documentation). Put writes the buffer once maxPendingEntries entries or
// slots are waiting, so a write error may surface from Put, Flush or Sync.
func (x *Index) Put(key string, phyOffset, storeTimestamp int64) error {
	return x.put(keyHash(key), key, phyOffset, storeTimestamp)
}

// PutHash is Put of the key whose hash (KeyHash) is h, for a caller that
// hashes its keys without building them.
func (x *Index) PutHash(h int32, phyOffset, storeTimestamp int64) error {
	return x.put(h, "", phyOffset, storeTimestamp)
}

// keyName names a key in errors: key, or its hash if the caller gave only
// that.
func keyName(key string, h int32) string {
	if key == "" {
		return fmt.Sprintf("key of hash %d", h)
	}
	return strconv.Quote(key)
}

func (x *Index) put(h int32, key string, phyOffset, storeTimestamp int64) error {
	if err := x.checkWritable(); err != nil {
		return err
	}
	if storeTimestamp < 0 || storeTimestamp > maxNameMillis {
		return fmt.Errorf("index: put %s: store timestamp %d outside [0, %d]: %w", keyName(key, h), storeTimestamp, maxNameMillis, ErrInvalid)
	}
	if phyOffset < 0 {
		return fmt.Errorf("index: put %s: negative physical offset %d: %w", keyName(key, h), phyOffset, ErrInvalid)
	}
	if last := x.lastPhyOffset(); phyOffset < last {
		return fmt.Errorf("index: put %s: physical offset %d below the last indexed %d: %w", keyName(key, h), phyOffset, last, ErrInvalid)
	}
	act := x.active()
	if act == nil || act.hdr.indexCount >= x.geo.maxEntries {
		var err error
		if act, err = x.roll(storeTimestamp); err != nil {
			return err
		}
	}
	if act.slots == nil {
		// Not full, so Open loaded its table (scanSlots); load it if not.
		x.mu.Lock()
		err := x.scanSlots(act)
		x.mu.Unlock()
		if err != nil {
			return x.fail(err)
		}
	}
	return x.appendEntry(act, h, key, phyOffset, storeTimestamp)
}

// maxPendingEntries bounds the write buffer: Put flushes it once this many
// entries (1.25 MiB), and so at most as many slot heads, are waiting.
const maxPendingEntries = 1 << 16

// maxSlotRun caps a run of adjacent marked pages that flushPending writes
// with one WriteAt at 64 KiB, so that a buffer whose pages cover the whole
// slot table is written in bounded pieces.
const maxSlotRun = (64 << 10) / slotPageSize

// appendEntry appends one entry to act, which has room for it, in the write
// buffer. The buffer and the header change under the write lock: no query
// reaches entry indexCount before indexCount moves past it.
func (x *Index) appendEntry(act *file, h int32, key string, phyOffset, ts int64) error {
	slot := h % x.geo.slotCount
	count := act.hdr.indexCount
	head := act.slotHead(x.geo, slot)
	newSlot := head < firstOrdinal || head >= count // 0, or debris beyond the file's entries
	if newSlot {
		head = 0
	}
	begin := act.hdr.beginTimestamp
	if count == firstOrdinal {
		begin = ts
	}
	e := entry{keyHash: h, phyOffset: phyOffset, timeDiff: timeDiff(ts, begin), prevIndex: head}

	x.mu.Lock()
	act.pendEnts = e.append(act.pendEnts)
	binary.BigEndian.PutUint32(act.slots[x.geo.slotOffset(slot)-headerSize:], uint32(count))
	act.pendPage(x.geo, slot)
	hd := &act.hdr
	if count == firstOrdinal {
		hd.beginTimestamp, hd.beginPhyOffset, hd.endTimestamp = ts, phyOffset, ts
	}
	if newSlot {
		hd.hashSlotCount++
	}
	hd.indexCount++
	hd.endPhyOffset = phyOffset
	hd.endTimestamp = max(hd.endTimestamp, ts)
	x.mu.Unlock()

	// Each entry changes at most one slot: the entries bound the slots too.
	if len(act.pendEnts) >= maxPendingEntries*entrySize {
		if err := x.flushPending(act); err != nil {
			return fmt.Errorf("index: put %s: %w", keyName(key, h), err)
		}
	}
	return nil
}

// Flush writes the buffered entries and slot heads of the active file (see
// Put) without syncing them. Sync, Close and sealing flush too; Flush is for
// callers that want the page cache current without paying for an fsync.
// After a failed write it returns that error.
func (x *Index) Flush() error {
	if err := x.checkWritable(); err != nil {
		return err
	}
	if act := x.active(); act != nil {
		return x.flushPending(act)
	}
	return nil
}

// flushPending writes f's buffered entries with one WriteAt (they are
// contiguous), then the pages of its slot table that hold buffered heads
// (pendPages), from the table in memory, adjacent pages with one WriteAt
// (at most maxSlotRun pages); then it empties the buffer. Writer only. A
// page's other slots are written with the bytes the file holds already
// (the table holds the file's slots), and the header and the entries
// around the slot region are left out.
//
// Entries are written without the lock: queries read the ordinals being
// written from the buffer until it is emptied. Slots are written under the
// write lock, as before the table held the buffered heads. On failure the
// error is sticky and the buffer is kept, so queries still see every entry
// put.
func (x *Index) flushPending(f *file) error {
	if len(f.pendEnts) == 0 && !f.pendingSlots() {
		return nil
	}
	if len(f.pendEnts) > 0 {
		if _, err := f.f.WriteAt(f.pendEnts, x.geo.entryOffset(f.pendFirst)); err != nil {
			return x.fail(fmt.Errorf("index: write entries %d..%d of %q: %w",
				f.pendFirst, f.hdr.indexCount-1, f.path, err))
		}
	}
	// The slot region of the file: [headerSize, end).
	end := x.geo.slotOffset(x.geo.slotCount-1) + slotSize
	marked := func(p int64) bool { return f.pendPages[p>>6]&(1<<(p&63)) != 0 }
	x.mu.Lock()
	defer x.mu.Unlock()
	for w := range f.pendPages {
		for f.pendPages[w] != 0 {
			first := int64(w)*64 + int64(bits.TrailingZeros64(f.pendPages[w]))
			last := first
			for last+1 < int64(len(f.pendPages))*64 && last+1-first < maxSlotRun && marked(last+1) {
				last++
			}
			lo, hi := max(first*slotPageSize, headerSize), min((last+1)*slotPageSize, end)
			if _, err := f.f.WriteAt(f.slots[lo-headerSize:hi-headerSize], lo); err != nil {
				return x.fail(fmt.Errorf("index: write slots at bytes %d..%d of %q: %w", lo, hi, f.path, err))
			}
			for p := first; p <= last; p++ {
				f.pendPages[p>>6] &^= 1 << (p & 63)
			}
		}
	}
	f.resetPending() // keeps the capacity, at most maxPendingEntries entries
	return nil
}

// roll seals the active file, if any, and creates the next one, named after
// ts or, if that would not sort after the previous name, the previous name
// plus 1 ms.
func (x *Index) roll(ts int64) (*file, error) {
	ms := ts
	if act := x.active(); act != nil {
		if last, _ := parseFileName(act.name); ms <= last {
			ms = last + 1
		}
		if ms > maxNameMillis {
			return nil, fmt.Errorf("index: no file name after %q: %w", act.name, ErrInvalid)
		}
		if err := x.flushPending(act); err != nil {
			return nil, err
		}
		x.mu.Lock()
		act.pendEnts, act.pendPages = nil, nil // a sealed file never buffers again
		act.slots = nil                        // nor keeps its slot table in memory
		x.mu.Unlock()
		if _, err := act.f.WriteAt(act.hdr.encode(), 0); err != nil {
			return nil, x.fail(fmt.Errorf("index: seal %q: %w", act.path, err))
		}
		x.unsynced = append(x.unsynced, act)
	}
	name := fileName(ms)
	path := vfs.Join(x.dir, name)
	f, err := x.fs.Create(path)
	if err != nil {
		return nil, x.fail(fmt.Errorf("index: create %q: %w", path, err))
	}
	x.dirDirty = true
	fl := &file{name: name, path: path, f: f, hdr: header{indexCount: firstOrdinal}, pendFirst: firstOrdinal,
		slots: make([]byte, int64(x.geo.slotCount)*slotSize)}
	if err := f.Truncate(x.geo.fileSize()); err != nil {
		f.Close()
		return nil, x.fail(fmt.Errorf("index: preallocate %q: %w", path, err))
	}
	if err := x.mapFile(fl); err != nil {
		f.Close()
		return nil, x.fail(err)
	}
	x.mu.Lock()
	x.mu.files = append(x.mu.files, fl)
	x.mu.Unlock()
	x.log.Info("index: new file", "path", path)
	return fl, nil
}

// Sync makes every entry put so far durable: it fsyncs sealed files not yet
// synced, writes the active file's buffered entries and slots and its
// header, fsyncs it, and fsyncs
// the directory if files were created or removed. It returns the
// checkpoint to hand to Recover after a crash; the zero Checkpoint when
// there are no files.
func (x *Index) Sync() (Checkpoint, error) {
	if err := x.checkWritable(); err != nil {
		return Checkpoint{}, err
	}
	for len(x.unsynced) > 0 {
		f := x.unsynced[0]
		if err := f.f.Sync(); err != nil {
			return Checkpoint{}, x.fail(fmt.Errorf("index: sync %q: %w", f.path, err))
		}
		x.unsynced = x.unsynced[1:]
	}
	act := x.active()
	if act != nil {
		if err := x.flushPending(act); err != nil {
			return Checkpoint{}, err
		}
		if _, err := act.f.WriteAt(act.hdr.encode(), 0); err != nil {
			return Checkpoint{}, x.fail(fmt.Errorf("index: write header of %q: %w", act.path, err))
		}
		if err := act.f.Sync(); err != nil {
			return Checkpoint{}, x.fail(fmt.Errorf("index: sync %q: %w", act.path, err))
		}
	}
	if x.dirDirty {
		if err := x.fs.SyncDir(x.dir); err != nil {
			return Checkpoint{}, x.fail(fmt.Errorf("index: sync dir %q: %w", x.dir, err))
		}
		x.dirDirty = false
	}
	if act == nil {
		return Checkpoint{}, nil
	}
	return Checkpoint{File: act.name, Count: act.hdr.indexCount}, nil
}

// WriteCheckpoint is Sync without the fsyncs, for a caller that makes the
// whole file system durable itself (vfs.FS.SyncFS): it writes the active
// file's buffered entries and slots and its header, forgets which files and
// directory entries await a sync, and returns the checkpoint that becomes
// valid once the caller's SyncFS has returned. Until then, hand Recover the
// previous checkpoint.
func (x *Index) WriteCheckpoint() (Checkpoint, error) {
	if err := x.checkWritable(); err != nil {
		return Checkpoint{}, err
	}
	act := x.active()
	if act != nil {
		if err := x.flushPending(act); err != nil {
			return Checkpoint{}, err
		}
		if _, err := act.f.WriteAt(act.hdr.encode(), 0); err != nil {
			return Checkpoint{}, x.fail(fmt.Errorf("index: write header of %q: %w", act.path, err))
		}
	}
	x.unsynced = x.unsynced[:0]
	x.dirDirty = false
	if act == nil {
		return Checkpoint{}, nil
	}
	return Checkpoint{File: act.name, Count: act.hdr.indexCount}, nil
}

// Query returns the physical offsets of up to maxNum entries, newest first,
// whose key hash equals key's and whose time (beginTimestamp + 1000 *
// timeDiff, ms) lies in [begin, end]. maxNum is capped at
// Options.MaxQueryNum.
//
// The offsets are CANDIDATES: only a 4-byte hash is stored, so the caller
// must read each message and compare its real key before using it.
//
// Files are searched newest to oldest, skipping those whose [beginTimestamp,
// endTimestamp] misses [begin, end]. Unlike RocketMQ, the search does not stop
// early at an entry older than begin, because store timestamps need not
// increase along the log.
func (x *Index) Query(key string, maxNum int, begin, end int64) ([]int64, error) {
	return x.QueryHash(keyHash(key), maxNum, begin, end)
}

// QueryHash is Query of the key whose hash (KeyHash) is h.
func (x *Index) QueryHash(h int32, maxNum int, begin, end int64) ([]int64, error) {
	maxNum = min(maxNum, x.maxQuery)
	slot := h % x.geo.slotCount

	x.mu.RLock()
	defer x.mu.RUnlock()
	switch {
	case x.mu.closed:
		return nil, ErrClosed
	case x.mu.broken != nil:
		return nil, x.mu.broken
	}
	var out []int64
	if maxNum <= 0 || begin > end {
		return out, nil
	}
	for i := len(x.mu.files) - 1; i >= 0 && len(out) < maxNum; i-- {
		f := x.mu.files[i]
		if f.b == nil || f.hdr.indexCount <= firstOrdinal || f.hdr.endTimestamp < begin || f.hdr.beginTimestamp > end {
			continue
		}
		var err error
		if out, err = x.walkLocked(f, h, slot, maxNum, begin, end, out); err != nil {
			return out, err
		}
	}
	return out, nil
}

// walkLocked follows slot's chain in f from its head, appending matching
// offsets to out until it holds maxNum. Ordinals strictly decrease along a
// chain, so the walk ends even on corrupt data.
func (x *Index) walkLocked(f *file, h, slot int32, maxNum int, begin, end int64, out []int64) ([]int64, error) {
	count := f.hdr.indexCount
	cur := f.slotHead(x.geo, slot)
	if cur < firstOrdinal || cur >= count {
		return out, nil
	}
	for {
		off := x.geo.entryOffset(cur)
		e := decodeEntry(f.entryBytes(x.geo, cur))
		if e.timeDiff < 0 {
			return out, corruptf(f.path, off+offEntryTimeDiff, "entry %d: negative timeDiff %d", cur, e.timeDiff)
		}
		if t := entryTime(f.hdr.beginTimestamp, e.timeDiff); e.keyHash == h && t >= begin && t <= end {
			if out = append(out, e.phyOffset); len(out) >= maxNum {
				return out, nil
			}
		}
		if e.prevIndex == 0 {
			return out, nil
		}
		if e.prevIndex < firstOrdinal || e.prevIndex >= cur {
			return out, corruptf(f.path, off+offEntryPrevIndex, "entry %d: prevIndex %d not in [1, %d)", cur, e.prevIndex, cur)
		}
		cur = e.prevIndex
	}
}

// Files describes the index files, oldest first. For the active file the
// header fields are the in-memory ones, which run ahead of the disk until
// Sync.
func (x *Index) Files() []FileInfo {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]FileInfo, 0, len(x.mu.files))
	for _, f := range x.mu.files {
		out = append(out, FileInfo{
			Name:           f.name,
			BeginTimestamp: f.hdr.beginTimestamp,
			EndTimestamp:   f.hdr.endTimestamp,
			BeginPhyOffset: f.hdr.beginPhyOffset,
			EndPhyOffset:   f.hdr.endPhyOffset,
			HashSlotCount:  f.hdr.hashSlotCount,
			IndexCount:     f.hdr.indexCount,
		})
	}
	return out
}

// Close syncs the index (unless a write failed or Recover is pending) and
// closes its files. Later calls return ErrClosed; a second Close returns nil.
func (x *Index) Close() error {
	if x.mu.closed {
		return nil
	}
	var err error
	if x.werr == nil && x.mu.broken == nil {
		_, err = x.Sync()
	}
	return errors.Join(err, x.closeAll())
}

// closeAll unmaps and closes every file and marks the index closed.
func (x *Index) closeAll() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	var errs []error
	for _, f := range x.mu.files {
		errs = append(errs, f.close())
	}
	x.mu.files = nil
	x.mu.closed = true
	return errors.Join(errs...)
}

// unmap closes f's mapping. Callers hold the write lock.
func (f *file) unmap() error {
	if f.m == nil {
		return nil
	}
	err := f.m.Close()
	f.m, f.b = nil, nil
	if err != nil {
		return fmt.Errorf("index: unmap %q: %w", f.path, err)
	}
	return nil
}

// close unmaps and closes f. Callers hold the write lock.
func (f *file) close() error {
	err := f.unmap()
	if cerr := f.f.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("index: close %q: %w", f.path, cerr))
	}
	return err
}
