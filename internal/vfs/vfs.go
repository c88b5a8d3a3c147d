// Package vfs is raftmq's file-system seam. Every package that touches disk
// (commitlog, consumequeue, index, store) goes through FS and File, so tests
// can substitute an in-memory file system that loses unsynced data on a
// simulated crash (MemFS), or one that injects errors (ErrorFS).
//
// Concurrency contract: an FS is safe for concurrent use. A File is safe for
// concurrent ReadAt and for ReadAt concurrent with WriteAt on disjoint ranges;
// callers serialise WriteAt, Truncate and Sync on one File themselves (each
// raftmq file has a single writer). A Mapping is read-only; bytes written with
// WriteAt after the mapping was made are visible through it (as with a shared
// mmap of a Linux page cache), and its slice must not be used after Close.
package vfs

import (
	"errors"
	"io"
	"os"
)

// ErrNotExist is returned (wrapped) when a named file does not exist. It is
// os.ErrNotExist, so errors.Is works for both the OS and the memory FS.
var ErrNotExist = os.ErrNotExist

// Modes of what raftmq creates on disk: its files and directories hold
// messages, replicated state and key material, so they are for the
// broker's own user only. The OS file system creates every file with
// FileMode; callers of MkdirAll pass DirMode.
const (
	FileMode os.FileMode = 0o600
	DirMode  os.FileMode = 0o700
)

// ErrNoSpace is returned (wrapped) by writes when the device is full.
var ErrNoSpace = errors.New("vfs: no space left on device")

// FS is the file-system interface raftmq's storage uses.
type FS interface {
	// Create creates or truncates the named file for reading and writing.
	Create(name string) (File, error)
	// Open opens the named file read-only.
	Open(name string) (File, error)
	// OpenReadWrite opens the named file for reading and writing, creating it
	// if it does not exist, without truncating it.
	OpenReadWrite(name string) (File, error)
	// Remove removes the named file or empty directory.
	Remove(name string) error
	// RemoveAll removes a directory tree.
	RemoveAll(name string) error
	// Rename atomically renames oldname to newname, replacing newname.
	// The rename is durable only after SyncDir of the parent.
	Rename(oldname, newname string) error
	// MkdirAll creates a directory and its parents.
	MkdirAll(dir string, perm os.FileMode) error
	// List returns the names (not paths) in dir, sorted.
	List(dir string) ([]string, error)
	// Stat describes the named file.
	Stat(name string) (os.FileInfo, error)
	// SyncDir makes creations, renames and removals in dir durable.
	SyncDir(dir string) error
	// SyncFS makes every write, creation, rename and removal made so far on
	// the file system holding path durable, whatever file it touched
	// (syncfs(2) on Linux): one call instead of a Sync per file. Writes
	// made while it runs may or may not be covered.
	SyncFS(path string) error
	// Lock takes an exclusive advisory lock on the named file, creating it.
	// The lock is held until the returned Closer is closed.
	Lock(name string) (io.Closer, error)
	// DiskUsage reports the capacity and free bytes of the device holding path.
	DiskUsage(path string) (DiskUsage, error)
}

// DiskUsage is the space of one device.
type DiskUsage struct {
	Total uint64 // bytes
	Free  uint64 // bytes available to unprivileged writers
	Used  uint64 // bytes in use (not counting blocks reserved for root)
}

// UsedRatio returns the used fraction in [0,1] as df computes its Use%:
// used / (used + available), so that blocks reserved for root count as
// neither.
func (d DiskUsage) UsedRatio() float64 {
	if d.Used+d.Free == 0 {
		return 0
	}
	return float64(d.Used) / float64(d.Used+d.Free)
}

// File is an open file.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	// Sync flushes written data to stable storage (fdatasync on Linux).
	Sync() error
	// Truncate changes the size of the file. Growing fills with zeros.
	Truncate(size int64) error
	// Size returns the current size of the file.
	Size() (int64, error)
	// Map maps the first size bytes of the file read-only. size must not
	// exceed the file's size.
	Map(size int64) (Mapping, error)
}

// Mapping is a read-only view of a file's bytes.
type Mapping interface {
	Bytes() []byte
	Close() error
}

// WriteFileAtomic replaces name with data: it writes a temporary file, syncs
// it, renames it over name and syncs the directory, so a crash leaves either
// the old or the new content, never a mix.
func WriteFileAtomic(fs FS, dir, name string, data []byte) error {
	tmp := Join(dir, name+".tmp")
	f, err := fs.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fs.Rename(tmp, Join(dir, name)); err != nil {
		return err
	}
	return fs.SyncDir(dir)
}

// ReadFile reads a whole file.
func ReadFile(fs FS, name string) ([]byte, error) {
	f, err := fs.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n, err := f.Size()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return buf, nil
}

// Join joins path elements with '/'.
func Join(elem ...string) string {
	out := ""
	for _, e := range elem {
		if e == "" {
			continue
		}
		if out == "" || out[len(out)-1] == '/' {
			out += e
		} else {
			out += "/" + e
		}
	}
	return out
}

// Dir returns the directory part of a '/'-separated path.
func Dir(name string) string {
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '/' {
			if i == 0 {
				return "/"
			}
			return name[:i]
		}
	}
	return "."
}

// DropCache is a hint that bytes [off, off+n) of f, which must already be
// durable, will not be read soon: their pages are unmapped from m (which
// may be nil) and released from the page cache. It never changes what the
// file reads back. off and n are rounded inward to whole pages. File
// systems that cannot do this (memory, fault injection) ignore it.
func DropCache(f File, m Mapping, off, n int64) error {
	ps := int64(os.Getpagesize())
	lo := (off + ps - 1) / ps * ps
	hi := (off + n) / ps * ps
	if hi <= lo {
		return nil
	}
	if r, ok := m.(interface{ release(off, n int64) error }); ok {
		if err := r.release(lo, hi-lo); err != nil {
			return err
		}
	}
	if d, ok := f.(interface{ dropCache(off, n int64) error }); ok {
		return d.dropCache(lo, hi-lo)
	}
	return nil
}
