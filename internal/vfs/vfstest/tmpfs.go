// Package vfstest has test helpers for real file systems: a small tmpfs
// and a ballast that fills it.
package vfstest

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// SmallTmpfs mounts a tmpfs of size bytes on a new temporary directory for
// the test and returns the directory; it is unmounted at cleanup. It skips
// the test when it cannot mount (not root, no mount namespace rights).
func SmallTmpfs(t testing.TB, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	MountTmpfs(t, dir, size)
	return dir
}

// MountTmpfs mounts a tmpfs of size bytes on dir (which must exist) for
// the test, unmounted at cleanup; it skips the test when it cannot.
func MountTmpfs(t testing.TB, dir string, size int64) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+itoa(size)); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
}

// FillDisk writes a ballast file in dir until the device has no space
// left, and returns its path; removing it frees the space.
func FillDisk(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "ballast")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			t.Fatal(err)
		}
	}
	for _, n := range []int{4096, 512, 1} { // the last pages
		for {
			if _, err := f.Write(buf[:n]); err != nil {
				break
			}
		}
	}
	return path
}

func itoa(n int64) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for ; n > 0; n /= 10 {
		i--
		b[i] = byte('0' + n%10)
	}
	return string(b[i:])
}
