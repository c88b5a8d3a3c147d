package certs

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// The demo set (a CA and node certificates) is the writing user's only:
// its directory 0700, every file 0600, keys and certificates alike.
func TestDemoFilesPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	if err := Demo(dir, 2); err != nil {
		t.Fatal(err)
	}
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		want := os.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		} else {
			n++
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %v, want %v", path, got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 6 { // ca, ca-key, n1, n1-key, n2, n2-key
		t.Fatalf("only %d files written", n)
	}
}
