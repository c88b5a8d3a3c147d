package vfs

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

// MemFS is an in-memory FS that remembers what has been made durable, so a
// test can simulate a crash: CrashClone returns the file system as a machine
// would find it after losing power, keeping synced data and an arbitrary
// subset of unsynced writes (possibly torn at sector boundaries).
//
// File contents are durable after File.Sync; creations, renames and removals
// are durable after SyncDir of the parent directory.
type MemFS struct {
	mu struct {
		sync.Mutex
		cur     map[string]*memNode // the namespace as the process sees it
		durable map[string]*memNode // the namespace as it would survive a crash
		dirs    map[string]bool
		locks   map[string]bool
		cap     uint64 // 0: unlimited
	}
}

// SectorSize is the unit at which CrashClone may tear an unsynced write.
const SectorSize = 512

type memOp struct {
	off   int64
	data  []byte // nil for a truncate
	trunc int64  // new size for a truncate
}

type memNode struct {
	mu      sync.RWMutex
	data    []byte
	synced  []byte
	pending []memOp
}

var _ FS = (*MemFS)(nil)

// NewMem returns an empty in-memory file system.
func NewMem() *MemFS {
	m := &MemFS{}
	m.mu.cur = map[string]*memNode{}
	m.mu.durable = map[string]*memNode{}
	m.mu.dirs = map[string]bool{"/": true, ".": true}
	m.mu.locks = map[string]bool{}
	return m
}

// SetCapacity limits the total bytes of all files (0 means unlimited). Writes
// past it fail with ErrNoSpace; DiskUsage reports against it.
func (m *MemFS) SetCapacity(total uint64) {
	m.mu.Lock()
	m.mu.cap = total
	m.mu.Unlock()
}

func clean(name string) string {
	name = strings.TrimSuffix(name, "/")
	if name == "" {
		return "/"
	}
	return name
}

func (m *MemFS) usedLocked() uint64 {
	var n uint64
	for _, f := range m.mu.cur {
		f.mu.RLock()
		n += uint64(len(f.data))
		f.mu.RUnlock()
	}
	return n
}

func (m *MemFS) checkDirLocked(name string) error {
	if d := Dir(name); !m.mu.dirs[d] {
		return &os.PathError{Op: "open", Path: name, Err: ErrNotExist}
	}
	return nil
}

// Create implements FS.
func (m *MemFS) Create(name string) (File, error) {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.checkDirLocked(name); err != nil {
		return nil, err
	}
	n := &memNode{}
	m.mu.cur[name] = n
	return &memFile{fs: m, n: n, name: name, writable: true}, nil
}

// Open implements FS.
func (m *MemFS) Open(name string) (File, error) {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.mu.cur[name]
	if !ok {
		return nil, &os.PathError{Op: "open", Path: name, Err: ErrNotExist}
	}
	return &memFile{fs: m, n: n, name: name}, nil
}

// OpenReadWrite implements FS.
func (m *MemFS) OpenReadWrite(name string) (File, error) {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.mu.cur[name]
	if !ok {
		if err := m.checkDirLocked(name); err != nil {
			return nil, err
		}
		n = &memNode{}
		m.mu.cur[name] = n
	}
	return &memFile{fs: m, n: n, name: name, writable: true}, nil
}

// Remove implements FS.
func (m *MemFS) Remove(name string) error {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.mu.cur[name]; ok {
		delete(m.mu.cur, name)
		return nil
	}
	if m.mu.dirs[name] {
		for p := range m.mu.cur {
			if strings.HasPrefix(p, name+"/") {
				return &os.PathError{Op: "remove", Path: name, Err: fmt.Errorf("directory not empty")}
			}
		}
		delete(m.mu.dirs, name)
		return nil
	}
	return &os.PathError{Op: "remove", Path: name, Err: ErrNotExist}
}

// RemoveAll implements FS.
func (m *MemFS) RemoveAll(name string) error {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	for p := range m.mu.cur {
		if p == name || strings.HasPrefix(p, name+"/") {
			delete(m.mu.cur, p)
		}
	}
	for d := range m.mu.dirs {
		if d == name || strings.HasPrefix(d, name+"/") {
			delete(m.mu.dirs, d)
		}
	}
	return nil
}

// Rename implements FS.
func (m *MemFS) Rename(oldname, newname string) error {
	oldname, newname = clean(oldname), clean(newname)
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.mu.cur[oldname]
	if !ok {
		return &os.PathError{Op: "rename", Path: oldname, Err: ErrNotExist}
	}
	if err := m.checkDirLocked(newname); err != nil {
		return err
	}
	delete(m.mu.cur, oldname)
	m.mu.cur[newname] = n
	return nil
}

// MkdirAll implements FS. Directories are durable at once (raftmq creates
// them at start-up and syncs their parents).
func (m *MemFS) MkdirAll(dir string, perm os.FileMode) error {
	dir = clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	for d := dir; d != "." && d != "/"; d = Dir(d) {
		if _, ok := m.mu.cur[d]; ok {
			return &os.PathError{Op: "mkdir", Path: d, Err: fmt.Errorf("not a directory")}
		}
		m.mu.dirs[d] = true
	}
	return nil
}

// List implements FS.
func (m *MemFS) List(dir string) ([]string, error) {
	dir = clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.mu.dirs[dir] {
		return nil, &os.PathError{Op: "readdir", Path: dir, Err: ErrNotExist}
	}
	seen := map[string]bool{}
	prefix := dir + "/"
	if dir == "/" {
		prefix = "/"
	}
	add := func(p string) {
		if rest, ok := strings.CutPrefix(p, prefix); ok && rest != "" && !strings.Contains(rest, "/") {
			seen[rest] = true
		}
	}
	for p := range m.mu.cur {
		add(p)
	}
	for d := range m.mu.dirs {
		add(d)
	}
	out := make([]string, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	sort.Strings(out)
	return out, nil
}

type memInfo struct {
	name string
	size int64
	dir  bool
}

func (i memInfo) Name() string { return i.name }
func (i memInfo) Size() int64  { return i.size }
func (i memInfo) Mode() os.FileMode {
	return map[bool]os.FileMode{true: os.ModeDir | 0o755, false: 0o644}[i.dir]
}
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return i.dir }
func (i memInfo) Sys() any           { return nil }

// Stat implements FS.
func (m *MemFS) Stat(name string) (os.FileInfo, error) {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	base := name[strings.LastIndex(name, "/")+1:]
	if n, ok := m.mu.cur[name]; ok {
		n.mu.RLock()
		defer n.mu.RUnlock()
		return memInfo{name: base, size: int64(len(n.data))}, nil
	}
	if m.mu.dirs[name] {
		return memInfo{name: base, dir: true}, nil
	}
	return nil, &os.PathError{Op: "stat", Path: name, Err: ErrNotExist}
}

// SyncDir implements FS: the directory's entries become durable.
func (m *MemFS) SyncDir(dir string) error {
	dir = clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	inDir := func(p string) bool { return Dir(p) == dir }
	for p := range m.mu.durable {
		if inDir(p) {
			if _, ok := m.mu.cur[p]; !ok {
				delete(m.mu.durable, p)
			}
		}
	}
	for p, n := range m.mu.cur {
		if inDir(p) {
			m.mu.durable[p] = n
		}
	}
	return nil
}

// SyncFS implements FS: every file's data and every directory entry
// become durable, as after syncfs(2) of the one file system MemFS models.
func (m *MemFS) SyncFS(string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.mu.durable)
	for p, n := range m.mu.cur {
		m.mu.durable[p] = n
		n.mu.Lock()
		n.syncLocked()
		n.mu.Unlock()
	}
	return nil
}

type memLock struct {
	m    *MemFS
	name string
}

func (l memLock) Close() error {
	l.m.mu.Lock()
	delete(l.m.mu.locks, l.name)
	l.m.mu.Unlock()
	return nil
}

// Lock implements FS.
func (m *MemFS) Lock(name string) (io.Closer, error) {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.locks[name] {
		return nil, fmt.Errorf("vfs: lock %q: already held", name)
	}
	if _, ok := m.mu.cur[name]; !ok {
		if err := m.checkDirLocked(name); err != nil {
			return nil, err
		}
		m.mu.cur[name] = &memNode{}
	}
	m.mu.locks[name] = true
	return memLock{m, name}, nil
}

// DiskUsage implements FS.
func (m *MemFS) DiskUsage(string) (DiskUsage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	total := m.mu.cap
	if total == 0 {
		total = 1 << 40
	}
	used := m.usedLocked()
	if used > total {
		used = total
	}
	return DiskUsage{Total: total, Free: total - used, Used: used}, nil
}

// CrashClone returns the file system as it would be found after a power
// failure: synced file contents survive; each unsynced write survives with
// probability keep, and a surviving write may be torn to a prefix at a sector
// boundary; unsynced directory operations are each kept or lost at random.
// keep = 0 drops every unsynced byte. The receiver is not modified.
func (m *MemFS) CrashClone(rng *rand.Rand, keep float64) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := NewMem()
	c.mu.cap = m.mu.cap
	for d := range m.mu.dirs {
		c.mu.dirs[d] = true
	}
	names := map[string]bool{}
	for p := range m.mu.cur {
		names[p] = true
	}
	for p := range m.mu.durable {
		names[p] = true
	}
	sorted := make([]string, 0, len(names))
	for p := range names {
		sorted = append(sorted, p)
	}
	sort.Strings(sorted) // deterministic use of rng
	clones := map[*memNode]*memNode{}
	for _, p := range sorted {
		cur, dur := m.mu.cur[p], m.mu.durable[p]
		n := dur
		if cur != dur && keep > 0 && rng.Float64() < keep {
			n = cur
		}
		if n == nil {
			continue
		}
		cn, ok := clones[n]
		if !ok {
			cn = n.crashCopy(rng, keep)
			clones[n] = cn
		}
		c.mu.cur[p] = cn
		c.mu.durable[p] = cn
	}
	return c
}

func (n *memNode) crashCopy(rng *rand.Rand, keep float64) *memNode {
	n.mu.RLock()
	defer n.mu.RUnlock()
	data := append([]byte(nil), n.synced...)
	for _, op := range n.pending {
		if keep <= 0 || rng.Float64() >= keep {
			continue
		}
		if op.data == nil {
			data = resize(data, op.trunc)
			continue
		}
		w := op.data
		if rng.IntN(4) == 0 && len(w) > SectorSize { // torn write
			w = w[:SectorSize*(1+rng.IntN((len(w)-1)/SectorSize))]
		}
		if end := op.off + int64(len(w)); end > int64(len(data)) {
			data = resize(data, end)
		}
		copy(data[op.off:], w)
	}
	return &memNode{data: data, synced: append([]byte(nil), data...)}
}

func resize(b []byte, size int64) []byte {
	if size <= int64(len(b)) {
		return b[:size]
	}
	if size <= int64(cap(b)) {
		old := len(b)
		b = b[:size]
		clear(b[old:])
		return b
	}
	nb := make([]byte, size)
	copy(nb, b)
	return nb
}

type memFile struct {
	fs       *MemFS
	n        *memNode
	name     string
	writable bool
	closed   bool
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.n.mu.RLock()
	defer f.n.mu.RUnlock()
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	k := copy(p, f.n.data[off:])
	if k < len(p) {
		return k, io.EOF
	}
	return k, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	if !f.writable {
		return 0, &os.PathError{Op: "write", Path: f.name, Err: os.ErrPermission}
	}
	end := off + int64(len(p))
	f.fs.mu.Lock()
	if c := f.fs.mu.cap; c > 0 {
		f.n.mu.RLock()
		grow := end - int64(len(f.n.data))
		f.n.mu.RUnlock()
		if grow > 0 && f.fs.usedLocked()+uint64(grow) > c {
			f.fs.mu.Unlock()
			return 0, &os.PathError{Op: "write", Path: f.name, Err: ErrNoSpace}
		}
	}
	f.fs.mu.Unlock()
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	if end > int64(len(f.n.data)) {
		f.n.data = resize(f.n.data, end)
	}
	copy(f.n.data[off:], p)
	f.n.pending = append(f.n.pending, memOp{off: off, data: append([]byte(nil), p...)})
	return len(p), nil
}

func (f *memFile) Close() error { f.closed = true; return nil }

func (f *memFile) Sync() error {
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	f.n.syncLocked()
	return nil
}

// syncLocked makes n's pending writes durable. Caller holds n.mu.
func (n *memNode) syncLocked() {
	for _, op := range n.pending {
		if op.data == nil {
			n.synced = resize(n.synced, op.trunc)
			continue
		}
		if end := op.off + int64(len(op.data)); end > int64(len(n.synced)) {
			n.synced = resize(n.synced, end)
		}
		copy(n.synced[op.off:], op.data)
	}
	n.pending = nil
}

func (f *memFile) Truncate(size int64) error {
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	f.n.data = resize(f.n.data, size)
	f.n.pending = append(f.n.pending, memOp{trunc: size})
	return nil
}

func (f *memFile) Size() (int64, error) {
	f.n.mu.RLock()
	defer f.n.mu.RUnlock()
	return int64(len(f.n.data)), nil
}

// Map returns a view of the file's current buffer. As with mmap, writes
// within the mapped range are visible; the file must not be grown by
// Truncate while mapped (raftmq preallocates files before mapping them).
func (f *memFile) Map(size int64) (Mapping, error) {
	f.n.mu.RLock()
	defer f.n.mu.RUnlock()
	if size > int64(len(f.n.data)) {
		return nil, fmt.Errorf("vfs: map %q: size %d beyond file size %d", f.name, size, len(f.n.data))
	}
	return memMapping(f.n.data[:size:size]), nil
}

type memMapping []byte

func (m memMapping) Bytes() []byte { return m }
func (m memMapping) Close() error  { return nil }
