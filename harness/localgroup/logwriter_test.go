package localgroup

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A log file on a full disk (/dev/full answers every write with ENOSPC)
// does not swallow the node's lines: they go to the fallback, whole.
func TestLogWriterFallsBackWhenTheFileIsFull(t *testing.T) {
	f, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no /dev/full: %v", err)
	}
	defer f.Close()
	var out bytes.Buffer
	w := newLogWriter(f, &out, 2)
	for _, s := range []string{"level=INFO msg=one\nlevel=ERR", "OR msg=\"disk full\"\n"} {
		if n, err := w.Write([]byte(s)); err != nil || n != len(s) {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	got := out.String()
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "no space left on device") ||
		lines[1] != "n2| level=INFO msg=one" || lines[2] != "n2| level=ERROR msg=\"disk full\"" {
		t.Fatalf("fallback got:\n%s", got)
	}
}

func TestLogWriterWritesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "broker.log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out bytes.Buffer
	w := newLogWriter(f, &out, 1)
	if _, err := w.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if string(b) != "hello\n" || out.Len() != 0 {
		t.Fatalf("file %q, fallback %q", b, out.String())
	}
}
