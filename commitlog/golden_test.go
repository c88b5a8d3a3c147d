package commitlog

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

// goldenLog builds a small, fixed log: two segments of 4 KiB (so one is
// sealed, with its sidecar) and three entry types.
func goldenLog(t *testing.T) *vfs.MemFS {
	fs := vfs.NewMem()
	l, err := Open(fs, "/log", Options{SegmentSize: 4096})
	require.NoError(t, err)
	w := writerT(t, l)
	var ents []Entry
	for i := uint64(1); i <= 9; i++ {
		ents = append(ents, Entry{Index: i, Term: 1 + i/5, Type: uint32(i % 3), Data: bytes.Repeat([]byte{byte('a' + i)}, int(i*100))})
	}
	require.NoError(t, w.AppendSync(ents...))
	require.NoError(t, l.Close())
	return fs
}

// TestGoldenFiles pins the on-disk format: segments, sidecar and
// checkpoint must be byte-identical to testdata/golden. Regenerate only for
// a deliberate format change: go test ./commitlog -run Golden -update
func TestGoldenFiles(t *testing.T) {
	fs := goldenLog(t)
	names, err := fs.List("/log")
	require.NoError(t, err)
	require.Contains(t, names, segmentName(0)+".idx")
	for _, n := range names {
		got, err := vfs.ReadFile(fs, "/log/"+n)
		require.NoError(t, err)
		path := filepath.Join("testdata", "golden", n)
		if *update {
			require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
			require.NoError(t, os.WriteFile(path, got, 0o644))
			continue
		}
		want, err := os.ReadFile(path)
		require.NoError(t, err, "missing golden file; run with -update")
		require.True(t, bytes.Equal(want, got), "%s differs from the golden file", n)
	}
	// The golden files open and read back.
	gfs := vfs.NewMem()
	require.NoError(t, gfs.MkdirAll("/log", 0o755))
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join("testdata", "golden", n))
		require.NoError(t, err)
		f, err := gfs.Create("/log/" + n)
		require.NoError(t, err)
		_, err = f.WriteAt(b, 0)
		require.NoError(t, err)
	}
	l, err := Open(gfs, "/log", Options{SegmentSize: 4096})
	require.NoError(t, err)
	defer l.Close()
	require.Equal(t, uint64(9), l.LastIndex())
	ents, err := l.Entries(1, 10, 1<<20)
	require.NoError(t, err)
	for _, e := range ents {
		require.Equal(t, bytes.Repeat([]byte{byte('a' + e.Index)}, int(e.Index*100)), e.Data)
		require.Equal(t, uint32(e.Index%3), e.Type)
	}
}

// FuzzOpenSegment feeds arbitrary bytes after a valid segment header (and
// arbitrary checkpoints) to recovery: it must never panic, and whatever it
// accepts must read back consistently.
func FuzzOpenSegment(f *testing.F) {
	fs := vfs.NewMem()
	l, err := Open(fs, "/log", Options{SegmentSize: 4096})
	if err != nil {
		f.Fatal(err)
	}
	_ = writerT(f, l).AppendSync(Entry{Index: 1, Term: 1, Data: []byte("hello")}, Entry{Index: 2, Term: 2, Data: []byte("world")})
	_ = l.Close()
	seg, _ := vfs.ReadFile(fs, "/log/"+segmentName(0))
	f.Add(seg[SegmentHeaderSize:200], uint64(0))
	f.Add(seg[SegmentHeaderSize:100], uint64(1))
	f.Add([]byte{0x52, 0x4d, 0x51, 0x45, 0, 0, 0, 40}, uint64(5))
	f.Fuzz(func(t *testing.T, data []byte, durable uint64) {
		m := vfs.NewMem()
		_ = m.MkdirAll("/log", 0o755)
		b := make([]byte, 4096)
		copy(b, seg[:SegmentHeaderSize])
		copy(b[SegmentHeaderSize:], data)
		file, _ := m.Create("/log/" + segmentName(0))
		_, _ = file.WriteAt(b, 0)
		l, err := Open(m, "/log", Options{SegmentSize: 4096, DurableIndex: durable % 8})
		if err != nil {
			return
		}
		defer l.Close()
		w := writerT(t, l)
		last := l.LastIndex()
		if last >= l.FirstIndex() {
			if _, err := l.Entries(l.FirstIndex(), last+1, 1<<20); err != nil {
				t.Fatalf("accepted log does not read back: %v", err)
			}
			if err := l.Scan(l.FirstIndex(), true, func(EntryRef) error { return nil }); err != nil {
				t.Fatalf("accepted log fails verification: %v", err)
			}
		}
		if err := w.AppendSync(Entry{Index: last + 1, Term: 1 << 40, Data: []byte("x")}); err != nil {
			t.Fatalf("append after recovery: %v", err)
		}
	})
}
