package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"syscall"

	mmap "github.com/edsrzf/mmap-go"
	"golang.org/x/sys/unix"
)

// Default is the operating system's file system.
func Default() FS { return osFS{} }

type osFS struct{}

var _ FS = osFS{}

func (osFS) Create(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, FileMode)
	if err != nil {
		return nil, err
	}
	return osFile{f: f}, nil
}

func (osFS) Open(name string) (File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	return osFile{f: f}, nil
}

func (osFS) OpenReadWrite(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, FileMode)
	if err != nil {
		return nil, err
	}
	return osFile{f: f}, nil
}

func (osFS) Remove(name string) error                    { return os.Remove(name) }
func (osFS) RemoveAll(name string) error                 { return os.RemoveAll(name) }
func (osFS) Rename(o, n string) error                    { return os.Rename(o, n) }
func (osFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }
func (osFS) Stat(name string) (os.FileInfo, error)       { return os.Stat(name) }

func (osFS) List(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	sort.Strings(names)
	return names, nil
}

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("vfs: sync dir %q: %w", dir, err)
	}
	return nil
}

// SyncFS implements FS with syncfs(2), which writes back every dirty page
// and inode of the file system and waits for them (it reports writeback
// errors since Linux 5.8).
func (osFS) SyncFS(path string) error {
	d, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("vfs: syncfs %q: %w", path, err)
	}
	defer d.Close()
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		return fmt.Errorf("vfs: syncfs %q: %w", path, err)
	}
	return nil
}

type osLock struct{ f *os.File }

func (l osLock) Close() error {
	_ = unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
	return l.f.Close()
}

func (osFS) Lock(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, FileMode)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("vfs: lock %q (is another process using this directory?): %w", name, err)
	}
	return osLock{f}, nil
}

func (osFS) DiskUsage(path string) (DiskUsage, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return DiskUsage{}, fmt.Errorf("vfs: statfs %q: %w", path, err)
	}
	bs := uint64(st.Bsize)
	return DiskUsage{Total: st.Blocks * bs, Free: st.Bavail * bs, Used: (st.Blocks - st.Bfree) * bs}, nil
}

// osFile is a value of one pointer, so a File of it costs no allocation of
// its own beyond the os.File (an interface holds a pointer-shaped value
// directly): one heap object fewer per open file for the collector to mark.
type osFile struct{ f *os.File }

func (o osFile) ReadAt(p []byte, off int64) (int, error) { return o.f.ReadAt(p, off) }

func (o osFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := o.f.WriteAt(p, off)
	if err != nil && errors.Is(err, syscall.ENOSPC) {
		err = fmt.Errorf("%w: %w", ErrNoSpace, err)
	}
	return n, err
}

func (o osFile) Close() error { return o.f.Close() }

func (o osFile) Sync() error {
	// fdatasync: the data and the metadata needed to read it back (size),
	// not timestamps.
	if err := unix.Fdatasync(int(o.f.Fd())); err != nil {
		return &os.PathError{Op: "fdatasync", Path: o.f.Name(), Err: err}
	}
	return nil
}

func (o osFile) Truncate(size int64) error { return o.f.Truncate(size) }

func (o osFile) Size() (int64, error) {
	st, err := o.f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

func (o osFile) Map(size int64) (Mapping, error) {
	if size == 0 {
		return emptyMapping{}, nil
	}
	m, err := mmap.MapRegion(o.f, int(size), mmap.RDONLY, 0, 0)
	if err != nil {
		return nil, fmt.Errorf("vfs: mmap %q: %w", o.f.Name(), err)
	}
	return osMapping{m}, nil
}

type osMapping struct{ m mmap.MMap }

func (m osMapping) Bytes() []byte { return m.m }
func (m osMapping) Close() error  { return m.m.Unmap() }

type emptyMapping struct{}

func (emptyMapping) Bytes() []byte { return nil }
func (emptyMapping) Close() error  { return nil }

// dropCache tells the kernel the file's bytes [off, off+n) will not be read
// soon (POSIX_FADV_DONTNEED), so their clean page-cache pages can be freed.
func (o osFile) dropCache(off, n int64) error {
	if err := unix.Fadvise(int(o.f.Fd()), off, n, unix.FADV_DONTNEED); err != nil {
		return &os.PathError{Op: "fadvise", Path: o.f.Name(), Err: err}
	}
	return nil
}

// release unmaps the pages of [off, off+n) from this mapping
// (MADV_DONTNEED). The mapping is a read-only shared file mapping, so a
// later access faults the file's bytes back in; nothing changes.
func (m osMapping) release(off, n int64) error {
	if off < 0 || n <= 0 || off+n > int64(len(m.m)) {
		return nil
	}
	if err := unix.Madvise(m.m[off:off+n], unix.MADV_DONTNEED); err != nil {
		return fmt.Errorf("vfs: madvise: %w", err)
	}
	return nil
}
