package vfs

import (
	"errors"
	"path/filepath"
	"testing"
)

// Reading a mapping past the end of a file that was truncated under it
// faults (SIGBUS); CatchFault turns that into an error.
func TestCatchFault(t *testing.T) {
	fs := Default()
	path := filepath.Join(t.TempDir(), "f")
	f, err := fs.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, 64<<10), 0); err != nil {
		t.Fatal(err)
	}
	m, err := f.Map(64 << 10)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := f.Truncate(0); err != nil {
		t.Fatal(err)
	}
	var sum byte
	err = CatchFault(func() error {
		for _, c := range m.Bytes()[32<<10:] {
			sum += c
		}
		return nil
	})
	if !errors.Is(err, ErrFault) {
		t.Fatalf("CatchFault = %v (sum %d), want ErrFault", err, sum)
	}
	if err := CatchFault(func() error { return nil }); err != nil {
		t.Fatalf("CatchFault of a clean read = %v", err)
	}
}
