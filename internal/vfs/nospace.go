package vfs

import (
	"errors"
	"os"
	"sync/atomic"
	"syscall"
	"time"
)

// IsNoSpace reports whether err says the device is full: ErrNoSpace from a
// File of this package, or a raw ENOSPC (or EDQUOT, a user's quota) from
// code that writes files itself, such as bbolt.
func IsNoSpace(err error) bool {
	return err != nil && (errors.Is(err, ErrNoSpace) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT))
}

// StallOptions configure a StallFS.
type StallOptions struct {
	// Stop ends every wait: an operation still failing for lack of space
	// then returns its error.
	Stop <-chan struct{}
	// OnStall is called when an operation starts waiting for space, with
	// its path and error, and OnResume when no operation waits any more.
	// Either may be nil. They are called from the writer's goroutine and
	// must not block.
	OnStall  func(path string, err error)
	OnResume func()
	// MaxBackoff caps the wait between two attempts (default 1 s; the
	// first wait is 10 ms, doubling).
	MaxBackoff time.Duration
}

// StallFS wraps an FS so that writes failing for lack of space (IsNoSpace)
// are retried, with backoff, until they succeed or Stop is closed: a full
// device makes the writer wait instead of failing. It retries WriteAt,
// Truncate, Create, OpenReadWrite, MkdirAll and Rename; syncs are not
// retried (after a failed fsync the page cache's state is unknown), nor
// are reads. Each retried call is repeated whole: WriteAt rewrites the
// same bytes at the same offset, so a short write is completed.
//
// Use it for writers whose work can wait and must not be lost, such as
// state derived from a log: the caller blocks, holding whatever it holds.
type StallFS struct {
	FS
	opts    StallOptions
	waiting atomic.Int32
}

// Stall wraps fs (see StallFS).
func Stall(fs FS, opts StallOptions) *StallFS {
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = time.Second
	}
	return &StallFS{FS: fs, opts: opts}
}

// Stalled reports whether an operation is waiting for space now.
func (s *StallFS) Stalled() bool { return s.waiting.Load() > 0 }

// retry runs op until it succeeds, fails for a reason other than space, or
// Stop is closed.
func (s *StallFS) retry(path string, op func() error) error {
	err := op()
	if !IsNoSpace(err) {
		return err
	}
	if s.waiting.Add(1) == 1 && s.opts.OnStall != nil {
		s.opts.OnStall(path, err)
	}
	defer func() {
		if s.waiting.Add(-1) == 0 && s.opts.OnResume != nil {
			s.opts.OnResume()
		}
	}()
	wait := 10 * time.Millisecond
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-s.opts.Stop:
			return err
		case <-t.C:
		}
		if err = op(); !IsNoSpace(err) {
			return err
		}
		wait = min(2*wait, s.opts.MaxBackoff)
		t.Reset(wait)
	}
}

// Create implements FS.
func (s *StallFS) Create(name string) (File, error) {
	var f File
	err := s.retry(name, func() (err error) { f, err = s.FS.Create(name); return })
	if err != nil {
		return nil, err
	}
	return &stallFile{File: f, s: s, name: name}, nil
}

// OpenReadWrite implements FS.
func (s *StallFS) OpenReadWrite(name string) (File, error) {
	var f File
	err := s.retry(name, func() (err error) { f, err = s.FS.OpenReadWrite(name); return })
	if err != nil {
		return nil, err
	}
	return &stallFile{File: f, s: s, name: name}, nil
}

// MkdirAll implements FS.
func (s *StallFS) MkdirAll(dir string, perm os.FileMode) error {
	return s.retry(dir, func() error { return s.FS.MkdirAll(dir, perm) })
}

// Rename implements FS.
func (s *StallFS) Rename(o, n string) error {
	return s.retry(n, func() error { return s.FS.Rename(o, n) })
}

type stallFile struct {
	File
	s    *StallFS
	name string
}

func (f *stallFile) WriteAt(p []byte, off int64) (int, error) {
	var n int
	err := f.s.retry(f.name, func() (err error) { n, err = f.File.WriteAt(p, off); return })
	return n, err
}

func (f *stallFile) Truncate(size int64) error {
	return f.s.retry(f.name, func() error { return f.File.Truncate(size) })
}

// dropCache and release pass through, so DropCache keeps working.
func (f *stallFile) dropCache(off, n int64) error {
	if d, ok := f.File.(interface{ dropCache(off, n int64) error }); ok {
		return d.dropCache(off, n)
	}
	return nil
}
