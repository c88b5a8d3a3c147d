package vfs

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// LazyFS wraps an FS (normally Default()) so that file data reaches the
// underlying files only when it is synced. It is the chaos harness's
// "power-loss" fault: a broker whose storage goes through a LazyFS keeps every
// unsynced write in its own memory, so kill -9 of the process loses exactly
// the data a machine crash would lose from the page cache, in the manner of
// the LazyFS FUSE file system Jepsen uses.
//
// # Semantics
//
// File data. WriteAt and Truncate change an in-memory overlay of the file;
// ReadAt, Size, Map and FS.Stat see the overlay at once (read-your-writes),
// including through other handles of the same file, because all handles of
// one path share one overlay, as all file descriptors share one page cache.
// File.Sync writes the byte ranges changed since the last Sync, and any size
// change, to the underlying file, then syncs it (fdatasync). Only then is the
// data on disk: until a Sync, the underlying file keeps its old content. A
// file closed with unsynced data keeps its overlay in memory, so reopening it
// through the same LazyFS still sees the data; it reaches disk when some
// handle of the file is synced, or on SyncAll.
//
// Namespace. Create, Rename, Remove, RemoveAll and MkdirAll are applied to the
// underlying FS immediately; SyncDir, List, Lock and DiskUsage pass straight
// through. This is weaker than a real power failure, which can also undo a
// create, rename or removal whose directory was not synced (MemFS.CrashClone
// models that). Create of a new file creates it, empty, on disk at once, and
// Create of an existing file truncates it on disk at once; the data written
// afterwards stays in memory until Sync. WriteFileAtomic works unchanged.
//
// Failures. Since writes go to memory, a full device (ErrNoSpace) is reported
// by Sync, not by WriteAt. A Sync that fails leaves the data it tried to write
// marked unsynced, so the next Sync writes it again. A process killed in the
// middle of a Sync may leave part of the unsynced data on disk, as a crash
// during fdatasync may.
//
// Mappings. Map returns a slice of the overlay, so bytes written after the
// Map are visible through it, as with a shared mmap. Existing mappings stay
// valid when the overlay must be reallocated to grow the file: from then on
// writes are copied into the old buffers too, while they are mapped (raftmq
// preallocates files with Truncate before mapping them, so that copying does
// not happen in practice). Bytes of a mapping beyond the end of a file that
// was shrunk read as zeros (with mmap they would fault).
//
// Memory. While a file is open, and afterwards while it has unsynced data or
// live mappings, its whole content is held in memory: opening a file reads it
// fully. That suits the chaos runs (segments of some tens of MiB and small
// metadata files) but not production use. Opening a large file also holds the
// LazyFS's namespace lock while it is read.
//
// Concurrency. A LazyFS is safe for concurrent use, and its files follow the
// File contract. In addition, Sync may run concurrently with WriteAt and
// Truncate on the same file (commitlog's group-commit flusher does that): it
// makes durable at least every write that completed before Sync was called.
type LazyFS struct {
	fs FS

	mu    sync.Mutex
	nodes map[string]*lazyNode // by absolute path; guarded by mu
}

var _ FS = (*LazyFS)(nil)

// NewLazy returns a LazyFS keeping unsynced file data of fs in memory. See
// LazyFS for the semantics.
func NewLazy(fs FS) *LazyFS {
	return &LazyFS{fs: fs, nodes: map[string]*lazyNode{}}
}

// lazyNode is the shared in-memory state of one file: the analogue of an
// inode and its page cache. Lock order: LazyFS.mu, then syncMu, then mu.
type lazyNode struct {
	// Guarded by LazyFS.mu.
	key      string // path in LazyFS.nodes, unless detached
	refs     int    // open handles, plus SyncAll's temporary references
	writable bool   // under was opened for writing
	detached bool   // the path was removed or replaced: no longer in nodes
	released bool   // under is closed; the node is dead

	// syncMu serialises Syncs (flush and fdatasync) and replacements of
	// under. under is read with syncMu or mu held and replaced with both.
	syncMu sync.Mutex
	under  File

	mu       sync.RWMutex
	buf      []byte // the overlay; len is the file size, buf[len:cap] is zero
	dirty    []span // ranges written since the last flush: sorted, disjoint
	minSize  int64  // smallest size since the last flush (at most diskSize)
	diskSize int64  // underlying file's size as of the last flush
	maps     map[*lazyMapping]struct{}
	stale    []*lazyMapping // live mappings of buffers replaced by growth
}

// key returns the map key of name: its absolute, cleaned path.
func lazyKey(name string) string {
	if abs, err := filepath.Abs(name); err == nil {
		return abs
	}
	return filepath.Clean(name)
}

// within reports whether key is dir or lies under it.
func within(key, dir string) bool {
	return key == dir || strings.HasPrefix(key, strings.TrimSuffix(dir, "/")+"/")
}

// newLazyNode reads the whole content of under into a new node.
func newLazyNode(key string, under File, writable bool) (*lazyNode, error) {
	size, err := under.Size()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, size)
	if size > 0 {
		n, err := under.ReadAt(buf, 0)
		if err != nil && !(errors.Is(err, io.EOF) && int64(n) == size) {
			return nil, fmt.Errorf("vfs: lazy: load %q: %w", key, err)
		}
	}
	return &lazyNode{
		key: key, refs: 1, writable: writable, under: under,
		buf: buf, minSize: size, diskSize: size,
		maps: map[*lazyMapping]struct{}{},
	}, nil
}

// handle returns a new handle on n. Caller holds LazyFS.mu and has counted
// the reference.
func (l *LazyFS) handle(n *lazyNode, name string, writable bool) *lazyFile {
	return &lazyFile{fs: l, n: n, name: name, writable: writable}
}

// upgradeLocked gives n a writable underlying file, opening name read-write
// if n was only opened read-only so far. Caller holds LazyFS.mu.
func (l *LazyFS) upgradeLocked(n *lazyNode, name string) error {
	if n.writable {
		return nil
	}
	u, err := l.fs.OpenReadWrite(name)
	if err != nil {
		return err
	}
	n.syncMu.Lock()
	n.mu.Lock()
	old := n.under
	n.under = u
	n.writable = true
	n.mu.Unlock()
	n.syncMu.Unlock()
	_ = old.Close()
	return nil
}

// releaseLocked closes n's underlying file and forgets n once nothing needs
// it: no handles, and either its path is gone or it has neither unsynced data
// nor live mappings. Caller holds LazyFS.mu.
func (l *LazyFS) releaseLocked(n *lazyNode) error {
	if n.refs > 0 || n.released {
		return nil
	}
	if !n.detached {
		n.mu.RLock()
		keep := n.dirtyLocked() || len(n.maps) > 0
		n.mu.RUnlock()
		if keep {
			return nil
		}
		delete(l.nodes, n.key)
	}
	n.released = true
	return n.under.Close()
}

// detachLocked forgets the node at key, whose path was removed or replaced.
// Open handles keep working on the unlinked file. Caller holds LazyFS.mu.
func (l *LazyFS) detachLocked(key string) {
	n, ok := l.nodes[key]
	if !ok {
		return
	}
	delete(l.nodes, key)
	n.detached = true
	_ = l.releaseLocked(n)
}

// Create implements FS. The file is created, or truncated, on disk at once.
func (l *LazyFS) Create(name string) (File, error) {
	k := lazyKey(name)
	l.mu.Lock()
	defer l.mu.Unlock()
	u, err := l.fs.Create(name)
	if err != nil {
		return nil, err
	}
	if n, ok := l.nodes[k]; ok {
		// The same inode, already cached: truncate the shared overlay, which
		// now matches the (empty) file on disk.
		n.syncMu.Lock()
		n.mu.Lock()
		n.shrinkLocked(0)
		n.dirty = nil
		n.minSize, n.diskSize = 0, 0
		old := u
		if !n.writable {
			old, n.under, n.writable = n.under, u, true
		}
		n.mu.Unlock()
		n.syncMu.Unlock()
		_ = old.Close()
		n.refs++
		return l.handle(n, name, true), nil
	}
	n, err := newLazyNode(k, u, true)
	if err != nil {
		u.Close()
		return nil, err
	}
	l.nodes[k] = n
	return l.handle(n, name, true), nil
}

// Open implements FS. The handle is read-only.
func (l *LazyFS) Open(name string) (File, error) {
	k := lazyKey(name)
	l.mu.Lock()
	defer l.mu.Unlock()
	if n, ok := l.nodes[k]; ok {
		n.refs++
		return l.handle(n, name, false), nil
	}
	u, err := l.fs.Open(name)
	if err != nil {
		return nil, err
	}
	n, err := newLazyNode(k, u, false)
	if err != nil {
		u.Close()
		return nil, err
	}
	l.nodes[k] = n
	return l.handle(n, name, false), nil
}

// OpenReadWrite implements FS. A missing file is created on disk at once.
func (l *LazyFS) OpenReadWrite(name string) (File, error) {
	k := lazyKey(name)
	l.mu.Lock()
	defer l.mu.Unlock()
	if n, ok := l.nodes[k]; ok {
		if err := l.upgradeLocked(n, name); err != nil {
			return nil, err
		}
		n.refs++
		return l.handle(n, name, true), nil
	}
	u, err := l.fs.OpenReadWrite(name)
	if err != nil {
		return nil, err
	}
	n, err := newLazyNode(k, u, true)
	if err != nil {
		u.Close()
		return nil, err
	}
	l.nodes[k] = n
	return l.handle(n, name, true), nil
}

// Remove implements FS. The removal is applied to the underlying FS at once;
// the file's unsynced data is dropped, and open handles keep working on the
// unlinked file.
func (l *LazyFS) Remove(name string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.fs.Remove(name); err != nil {
		return err
	}
	l.detachLocked(lazyKey(name))
	return nil
}

// RemoveAll implements FS, as Remove does for each file in the tree.
func (l *LazyFS) RemoveAll(name string) error {
	k := lazyKey(name)
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.fs.RemoveAll(name)
	for key := range l.nodes {
		if !within(key, k) {
			continue
		}
		if err != nil {
			// Partly removed: forget only the files that are gone.
			if _, serr := l.fs.Stat(key); !errors.Is(serr, ErrNotExist) {
				continue
			}
		}
		l.detachLocked(key)
	}
	return err
}

// Rename implements FS. The rename is applied to the underlying FS at once;
// the cached files move with it (a renamed directory takes its files along),
// and a file it replaces is forgotten.
func (l *LazyFS) Rename(oldname, newname string) error {
	ko, kn := lazyKey(oldname), lazyKey(newname)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.fs.Rename(oldname, newname); err != nil {
		return err
	}
	if ko == kn {
		return nil
	}
	for key := range l.nodes {
		if within(key, kn) && !within(key, ko) {
			l.detachLocked(key)
		}
	}
	var moved []*lazyNode
	for key, n := range l.nodes {
		if within(key, ko) {
			moved = append(moved, n)
			delete(l.nodes, key)
		}
	}
	for _, n := range moved {
		n.key = kn + n.key[len(ko):]
		l.nodes[n.key] = n
	}
	return nil
}

// MkdirAll implements FS by passing through.
func (l *LazyFS) MkdirAll(dir string, perm os.FileMode) error { return l.fs.MkdirAll(dir, perm) }

// List implements FS by passing through (the namespace is never deferred).
func (l *LazyFS) List(dir string) ([]string, error) { return l.fs.List(dir) }

// SyncDir implements FS by passing through.
func (l *LazyFS) SyncDir(dir string) error { return l.fs.SyncDir(dir) }

// SyncFS implements FS: every file's unsynced data reaches disk (SyncAll).
func (l *LazyFS) SyncFS(string) error { return l.SyncAll() }

// Lock implements FS by passing through.
func (l *LazyFS) Lock(name string) (io.Closer, error) { return l.fs.Lock(name) }

// DiskUsage implements FS by passing through: unsynced data uses no space.
func (l *LazyFS) DiskUsage(path string) (DiskUsage, error) { return l.fs.DiskUsage(path) }

// lazyInfo is an underlying FileInfo with the overlay's size.
type lazyInfo struct {
	os.FileInfo
	size int64
}

// Size returns the size of the overlay.
func (i lazyInfo) Size() int64 { return i.size }

// Stat implements FS. A file held in memory reports its overlay's size; the
// rest of the description comes from the underlying FS.
func (l *LazyFS) Stat(name string) (os.FileInfo, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fi, err := l.fs.Stat(name)
	if err != nil {
		return nil, err
	}
	if n, ok := l.nodes[lazyKey(name)]; ok && !fi.IsDir() {
		n.mu.RLock()
		size := int64(len(n.buf))
		n.mu.RUnlock()
		return lazyInfo{FileInfo: fi, size: size}, nil
	}
	return fi, nil
}

// SyncAll syncs every file held in memory, open or closed, and releases the
// memory of the closed ones. A graceful shutdown calls it so that data the
// broker wrote but never synced reaches disk, as the kernel would eventually
// write it back; a simulated power loss skips it.
func (l *LazyFS) SyncAll() error {
	l.mu.Lock()
	nodes := make([]*lazyNode, 0, len(l.nodes))
	for _, n := range l.nodes {
		n.refs++
		nodes = append(nodes, n)
	}
	l.mu.Unlock()
	var errs []error
	for _, n := range nodes {
		if err := n.sync(); err != nil {
			errs = append(errs, err)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range nodes {
		n.refs--
		if err := l.releaseLocked(n); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// dirtyLocked reports whether n has data or a size not yet on disk. Caller
// holds mu.
func (n *lazyNode) dirtyLocked() bool {
	return len(n.dirty) > 0 || n.minSize != n.diskSize || int64(len(n.buf)) != n.diskSize
}

// growLocked extends the overlay to size (> len(buf)) with zeros. If the
// buffer must be reallocated, the mappings of the old one are kept up to
// date from then on. Caller holds mu for writing.
func (n *lazyNode) growLocked(size int64) {
	if size <= int64(cap(n.buf)) {
		n.buf = n.buf[:size] // already zero
		return
	}
	c := int64(cap(n.buf))
	nb := make([]byte, size, max(size, c+c/2))
	copy(nb, n.buf)
	for m := range n.maps {
		if !m.stale {
			m.stale = true
			n.stale = append(n.stale, m)
		}
	}
	n.buf = nb
}

// shrinkLocked cuts the overlay to size (<= len(buf)), zeroing the bytes cut
// off, in the buffer and in the mappings of replaced buffers, so that growing
// again reads zeros. Caller holds mu for writing.
func (n *lazyNode) shrinkLocked(size int64) {
	clear(n.buf[size:])
	n.buf = n.buf[:size]
	for _, m := range n.stale {
		if size < int64(len(m.b)) {
			clear(m.b[size:])
		}
	}
}

// flushLocked writes the size changes and dirty ranges to the underlying
// file and returns the ranges it wrote. Caller holds syncMu and mu.
func (n *lazyNode) flushLocked() ([]span, error) {
	size := int64(len(n.buf))
	if n.minSize < n.diskSize {
		// Cut first, so that bytes dropped by a shrink-and-regrow read back
		// as zeros on disk too.
		if err := n.under.Truncate(n.minSize); err != nil {
			return nil, err
		}
		n.diskSize = n.minSize
	}
	if size != n.diskSize {
		if err := n.under.Truncate(size); err != nil {
			return nil, err
		}
		n.diskSize = size
	}
	n.minSize = size
	for i, s := range n.dirty {
		if _, err := n.under.WriteAt(n.buf[s.start:s.end], s.start); err != nil {
			n.dirty = n.dirty[i:]
			return nil, err
		}
	}
	flushed := n.dirty
	n.dirty = nil
	return flushed, nil
}

// sync flushes n and syncs the underlying file. The flush holds mu, so
// writers wait for it, but not for the fdatasync that follows.
func (n *lazyNode) sync() error {
	n.syncMu.Lock()
	defer n.syncMu.Unlock()
	n.mu.Lock()
	flushed, err := n.flushLocked()
	n.mu.Unlock()
	if err != nil {
		return err
	}
	if err := n.under.Sync(); err != nil {
		// What was written may not be durable: mark it unsynced again, and
		// the size unknown, so the next Sync redoes it all.
		n.mu.Lock()
		size := int64(len(n.buf))
		for _, s := range clipSpans(flushed, size) {
			n.dirty = addSpan(n.dirty, s.start, s.end)
		}
		n.diskSize = math.MaxInt64
		n.mu.Unlock()
		return err
	}
	return nil
}

// lazyFile is a handle on a lazyNode.
type lazyFile struct {
	fs       *LazyFS
	n        *lazyNode
	name     string
	writable bool
	closed   atomic.Bool
}

// check returns the error of operation op on f, if it is not allowed.
func (f *lazyFile) check(op string, write bool, off int64) error {
	switch {
	case f.closed.Load():
		return &os.PathError{Op: op, Path: f.name, Err: os.ErrClosed}
	case write && !f.writable:
		return &os.PathError{Op: op, Path: f.name, Err: os.ErrPermission}
	case off < 0:
		return &os.PathError{Op: op, Path: f.name, Err: errors.New("negative offset")}
	}
	return nil
}

// ReadAt implements File, reading the overlay.
func (f *lazyFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.check("read", false, off); err != nil {
		return 0, err
	}
	n := f.n
	n.mu.RLock()
	defer n.mu.RUnlock()
	if off >= int64(len(n.buf)) {
		return 0, io.EOF
	}
	k := copy(p, n.buf[off:])
	if k < len(p) {
		return k, io.EOF
	}
	return k, nil
}

// WriteAt implements File, writing the overlay only.
func (f *lazyFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.check("write", true, off); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	n := f.n
	end := off + int64(len(p))
	n.mu.Lock()
	defer n.mu.Unlock()
	if end > int64(len(n.buf)) {
		n.growLocked(end)
	}
	copy(n.buf[off:], p)
	for _, m := range n.stale {
		if off < int64(len(m.b)) {
			copy(m.b[off:], p)
		}
	}
	n.dirty = addSpan(n.dirty, off, end)
	return len(p), nil
}

// Truncate implements File, resizing the overlay only.
func (f *lazyFile) Truncate(size int64) error {
	if err := f.check("truncate", true, size); err != nil {
		return err
	}
	n := f.n
	n.mu.Lock()
	defer n.mu.Unlock()
	if size > int64(len(n.buf)) {
		n.growLocked(size)
	} else {
		n.shrinkLocked(size)
		n.dirty = clipSpans(n.dirty, size)
		n.minSize = min(n.minSize, size)
	}
	return nil
}

// Sync implements File: the unsynced data of the file, written through any
// handle, goes to the underlying file, which is then synced.
func (f *lazyFile) Sync() error {
	if err := f.check("sync", false, 0); err != nil {
		return err
	}
	if err := f.n.sync(); err != nil {
		return fmt.Errorf("vfs: lazy sync %q: %w", f.name, err)
	}
	return nil
}

// Size implements File, returning the overlay's size.
func (f *lazyFile) Size() (int64, error) {
	if err := f.check("stat", false, 0); err != nil {
		return 0, err
	}
	f.n.mu.RLock()
	defer f.n.mu.RUnlock()
	return int64(len(f.n.buf)), nil
}

// Map implements File with a view of the overlay; see LazyFS.
func (f *lazyFile) Map(size int64) (Mapping, error) {
	if err := f.check("map", false, size); err != nil {
		return nil, err
	}
	n := f.n
	n.mu.Lock()
	defer n.mu.Unlock()
	if size > int64(len(n.buf)) {
		return nil, fmt.Errorf("vfs: map %q: size %d beyond file size %d", f.name, size, len(n.buf))
	}
	if size == 0 {
		return emptyMapping{}, nil
	}
	m := &lazyMapping{fs: f.fs, n: n, b: n.buf[:size:size]}
	n.maps[m] = struct{}{}
	return m, nil
}

// Close implements File. Unsynced data is not written: it stays in memory
// for later handles of the file, and is lost if the process dies.
func (f *lazyFile) Close() error {
	if !f.closed.CompareAndSwap(false, true) {
		return &os.PathError{Op: "close", Path: f.name, Err: os.ErrClosed}
	}
	l := f.fs
	l.mu.Lock()
	defer l.mu.Unlock()
	f.n.refs--
	return l.releaseLocked(f.n)
}

// lazyMapping is a Mapping of a lazyNode's buffer.
type lazyMapping struct {
	fs     *LazyFS
	n      *lazyNode
	b      []byte
	stale  bool // b is not the node's current buffer; guarded by n.mu
	closed bool // guarded by fs.mu
}

// Bytes implements Mapping.
func (m *lazyMapping) Bytes() []byte { return m.b }

// Close implements Mapping. Closing twice is a no-op.
func (m *lazyMapping) Close() error {
	l := m.fs
	l.mu.Lock()
	defer l.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	n := m.n
	n.mu.Lock()
	delete(n.maps, m)
	if m.stale {
		for i, s := range n.stale {
			if s == m {
				n.stale = append(n.stale[:i], n.stale[i+1:]...)
				break
			}
		}
	}
	n.mu.Unlock()
	return l.releaseLocked(n)
}

// span is the byte range [start, end).
type span struct{ start, end int64 }

// addSpan adds [start, end) to s, a sorted list of disjoint, non-adjacent
// spans, merging it with the spans it overlaps or touches.
func addSpan(s []span, start, end int64) []span {
	if start >= end {
		return s
	}
	if k := len(s); k == 0 || s[k-1].end < start {
		return append(s, span{start, end}) // the common, appending case
	} else if s[k-1].start <= start {
		s[k-1].end = max(s[k-1].end, end)
		return s
	}
	i := sort.Search(len(s), func(k int) bool { return s[k].end >= start })
	j := sort.Search(len(s), func(k int) bool { return s[k].start > end })
	if i == j {
		s = append(s, span{})
		copy(s[i+1:], s[i:])
		s[i] = span{start, end}
		return s
	}
	s[i] = span{min(start, s[i].start), max(end, s[j-1].end)}
	return append(s[:i+1], s[j:]...)
}

// clipSpans drops the parts of the spans in s at or beyond size.
func clipSpans(s []span, size int64) []span {
	for i := range s {
		if s[i].start >= size {
			return s[:i]
		}
		s[i].end = min(s[i].end, size)
	}
	return s
}
