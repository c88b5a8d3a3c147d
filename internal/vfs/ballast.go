package vfs

import (
	"os"
	"sync/atomic"
)

// BallastFS wraps an FS with a virtual ballast: a number of bytes of the
// device the file system pretends are taken, as a ballast file would take
// them, without writing anything. DiskUsage reports them as used (never
// more than the device has free), and a write, or the creation of a file,
// fails with ErrNoSpace when the device's free space is below the
// ballast plus what it writes. It is the quota seam of the chaos
// harness's disk-full nemesis where no small file system can be mounted
// (brokers get it only in builds with -tags mutant, through the fault
// endpoint). With no ballast it costs one atomic load per write.
type BallastFS struct {
	FS
	dir string // measured with DiskUsage
	n   atomic.Int64
}

// WithBallast wraps fs; dir is a path on the device to measure.
func WithBallast(fs FS, dir string) *BallastFS { return &BallastFS{FS: fs, dir: dir} }

// SetBallast sets the ballast to n bytes (0 or less: none).
func (b *BallastFS) SetBallast(n int64) { b.n.Store(max(n, 0)) }

// Ballast returns the ballast in bytes.
func (b *BallastFS) Ballast() int64 { return b.n.Load() }

// DiskUsage implements FS: the ballast counts as used.
func (b *BallastFS) DiskUsage(path string) (DiskUsage, error) {
	u, err := b.FS.DiskUsage(path)
	if err != nil {
		return u, err
	}
	take := min(uint64(b.n.Load()), u.Free)
	u.Free -= take
	u.Used += take
	return u, nil
}

// check fails a write of size bytes that the ballast leaves no room for.
func (b *BallastFS) check(op, path string, size int) error {
	n := b.n.Load()
	if n == 0 {
		return nil
	}
	u, err := b.FS.DiskUsage(b.dir)
	if err != nil {
		return nil // cannot tell: let the device decide
	}
	if u.Free < uint64(n)+uint64(size) {
		return &os.PathError{Op: op, Path: path, Err: ErrNoSpace}
	}
	return nil
}

// Create implements FS.
func (b *BallastFS) Create(name string) (File, error) {
	if err := b.check("create", name, 0); err != nil {
		return nil, err
	}
	f, err := b.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return &ballastFile{File: f, b: b, name: name}, nil
}

// OpenReadWrite implements FS.
func (b *BallastFS) OpenReadWrite(name string) (File, error) {
	f, err := b.FS.OpenReadWrite(name)
	if err != nil {
		return nil, err
	}
	return &ballastFile{File: f, b: b, name: name}, nil
}

type ballastFile struct {
	File
	b    *BallastFS
	name string
}

func (f *ballastFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.b.check("write", f.name, len(p)); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

// dropCache passes through, so DropCache keeps working.
func (f *ballastFile) dropCache(off, n int64) error {
	if d, ok := f.File.(interface{ dropCache(off, n int64) error }); ok {
		return d.dropCache(off, n)
	}
	return nil
}
