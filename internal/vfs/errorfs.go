package vfs

import (
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"
)

// Op names a file-system operation for error injection.
type Op int

// The operations an Injector sees.
const (
	OpCreate Op = iota
	OpOpen
	OpRead
	OpWrite
	OpSync
	OpTruncate
	OpRemove
	OpRename
	OpSyncDir
	OpMap
	OpList
)

func (o Op) String() string {
	return [...]string{"create", "open", "read", "write", "sync", "truncate", "remove", "rename", "syncdir", "map", "list"}[o]
}

// ErrInjected is the error an Injector returns by default.
var ErrInjected = errors.New("vfs: injected error")

// Injector decides whether an operation fails. It returns nil to let the
// operation through.
type Injector interface {
	MaybeError(op Op, path string) error
}

// InjectorFunc adapts a function to Injector.
type InjectorFunc func(op Op, path string) error

// MaybeError implements Injector.
func (f InjectorFunc) MaybeError(op Op, path string) error { return f(op, path) }

// Toggle is an Injector that fails the chosen operations while armed.
type Toggle struct {
	mu    sync.Mutex
	armed map[Op]bool
	Err   error
}

// Arm makes the ops fail until Disarm.
func (t *Toggle) Arm(ops ...Op) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.armed == nil {
		t.armed = map[Op]bool{}
	}
	for _, o := range ops {
		t.armed[o] = true
	}
}

// Disarm lets every op through again.
func (t *Toggle) Disarm() {
	t.mu.Lock()
	t.armed = nil
	t.mu.Unlock()
}

// MaybeError implements Injector.
func (t *Toggle) MaybeError(op Op, path string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.armed[op] {
		if t.Err != nil {
			return &os.PathError{Op: op.String(), Path: path, Err: t.Err}
		}
		return &os.PathError{Op: op.String(), Path: path, Err: ErrInjected}
	}
	return nil
}

// ErrorFS wraps an FS and fails operations the Injector chooses.
type ErrorFS struct {
	FS
	inj Injector
}

// WithErrors wraps fs with an error injector.
func WithErrors(fs FS, inj Injector) *ErrorFS { return &ErrorFS{FS: fs, inj: inj} }

func (e *ErrorFS) wrap(f File, err error, name string) (File, error) {
	if err != nil {
		return nil, err
	}
	return &errFile{File: f, inj: e.inj, name: name}, nil
}

// Create implements FS.
func (e *ErrorFS) Create(name string) (File, error) {
	if err := e.inj.MaybeError(OpCreate, name); err != nil {
		return nil, err
	}
	f, err := e.FS.Create(name)
	return e.wrap(f, err, name)
}

// Open implements FS.
func (e *ErrorFS) Open(name string) (File, error) {
	if err := e.inj.MaybeError(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := e.FS.Open(name)
	return e.wrap(f, err, name)
}

// OpenReadWrite implements FS.
func (e *ErrorFS) OpenReadWrite(name string) (File, error) {
	if err := e.inj.MaybeError(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := e.FS.OpenReadWrite(name)
	return e.wrap(f, err, name)
}

// Remove implements FS.
func (e *ErrorFS) Remove(name string) error {
	if err := e.inj.MaybeError(OpRemove, name); err != nil {
		return err
	}
	return e.FS.Remove(name)
}

// Rename implements FS.
func (e *ErrorFS) Rename(o, n string) error {
	if err := e.inj.MaybeError(OpRename, o); err != nil {
		return err
	}
	return e.FS.Rename(o, n)
}

// SyncDir implements FS.
func (e *ErrorFS) SyncDir(dir string) error {
	if err := e.inj.MaybeError(OpSyncDir, dir); err != nil {
		return err
	}
	return e.FS.SyncDir(dir)
}

// SyncFS implements FS; it fails as a file Sync would (OpSync).
func (e *ErrorFS) SyncFS(path string) error {
	if err := e.inj.MaybeError(OpSync, path); err != nil {
		return err
	}
	return e.FS.SyncFS(path)
}

// List implements FS.
func (e *ErrorFS) List(dir string) ([]string, error) {
	if err := e.inj.MaybeError(OpList, dir); err != nil {
		return nil, err
	}
	return e.FS.List(dir)
}

// Lock implements FS.
func (e *ErrorFS) Lock(name string) (io.Closer, error) { return e.FS.Lock(name) }

type errFile struct {
	File
	inj  Injector
	name string
}

func (f *errFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.inj.MaybeError(OpRead, f.name); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

func (f *errFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.inj.MaybeError(OpWrite, f.name); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *errFile) Sync() error {
	if err := f.inj.MaybeError(OpSync, f.name); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *errFile) Truncate(size int64) error {
	if err := f.inj.MaybeError(OpTruncate, f.name); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

func (f *errFile) Map(size int64) (Mapping, error) {
	if err := f.inj.MaybeError(OpMap, f.name); err != nil {
		return nil, err
	}
	return f.File.Map(size)
}

// ErrReadOnly is returned by the writes of a ReadOnly file system.
var ErrReadOnly = errors.New("vfs: read-only file system")

// ReadOnly wraps fs so that every write fails with ErrReadOnly: inspection
// tools open stores through it, so they can never repair or change data.
func ReadOnly(fs FS) FS {
	return WithErrors(fs, InjectorFunc(func(op Op, path string) error {
		switch op {
		case OpCreate, OpWrite, OpSync, OpTruncate, OpRemove, OpRename, OpSyncDir:
			return &os.PathError{Op: op.String(), Path: path, Err: ErrReadOnly}
		}
		return nil
	}))
}

// Counting wraps fs so that every operation op reaching it is counted in
// the returned counter (tests and benchmarks: how many writes or syncs a
// change saves).
func Counting(fs FS, op Op) (*ErrorFS, *atomic.Int64) {
	var n atomic.Int64
	return WithErrors(fs, InjectorFunc(func(o Op, _ string) error {
		if o == op {
			n.Add(1)
		}
		return nil
	})), &n
}
