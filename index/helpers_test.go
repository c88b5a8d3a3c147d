package index

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
)

// fsCase is one file system every functional test runs on.
type fsCase struct {
	name string
	new  func(t testing.TB) (vfs.FS, string)
}

func fileSystems() []fsCase {
	return []fsCase{
		{"os", func(t testing.TB) (vfs.FS, string) { return vfs.Default(), t.TempDir() + "/index" }},
		{"mem", func(testing.TB) (vfs.FS, string) { return vfs.NewMem(), "/store/index" }},
	}
}

// forEachFS runs fn as a subtest on every file system.
func forEachFS(t *testing.T, fn func(t *testing.T, fs vfs.FS, dir string)) {
	for _, c := range fileSystems() {
		t.Run(c.name, func(t *testing.T) {
			fs, dir := c.new(t)
			fn(t, fs, dir)
		})
	}
}

// tLogWriter sends log lines to t.Log.
type tLogWriter struct{ t testing.TB }

func (w tLogWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tLogWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func tinyOpts(t testing.TB, slots, entries int) Options {
	return Options{SlotCount: slots, MaxEntries: entries, Logger: testLogger(t)}
}

func openT(t testing.TB, fs vfs.FS, dir string, opts Options) *Index {
	t.Helper()
	x, err := Open(fs, dir, opts)
	require.NoError(t, err)
	return x
}

// op is one Put.
type op struct {
	key string
	phy int64
	ts  int64
}

func putAll(t testing.TB, x *Index, ops []op) {
	t.Helper()
	for _, o := range ops {
		require.NoError(t, x.Put(o.key, o.phy, o.ts))
	}
}

// baseTS is 2024-05-06T07:08:09.123Z.
const baseTS int64 = 1714979289123

// seqOps returns n puts of keys key-(i%keys), phy offsets 100*i, one second
// apart.
func seqOps(n, keys int) []op {
	ops := make([]op, n)
	for i := range ops {
		ops[i] = op{key: fmt.Sprintf("TopicTest#key-%d", i%keys), phy: int64(100 * i), ts: baseTS + int64(i)*1000}
	}
	return ops
}

// snapshot returns every file in dir by name.
func snapshot(t testing.TB, fs vfs.FS, dir string) map[string][]byte {
	t.Helper()
	names, err := fs.List(dir)
	require.NoError(t, err)
	out := map[string][]byte{}
	for _, n := range names {
		b, err := vfs.ReadFile(fs, vfs.Join(dir, n))
		require.NoError(t, err)
		out[n] = b
	}
	return out
}

// rawEntry decodes entry i of a file image by its documented offsets,
// independently of the package's decoder.
type rawEntry struct {
	hash, timeDiff, prev int32
	phy                  int64
}

func readRawEntry(b []byte, slots, i int) rawEntry {
	off := 40 + 4*slots + 20*i
	return rawEntry{
		hash:     int32(binary.BigEndian.Uint32(b[off:])),
		phy:      int64(binary.BigEndian.Uint64(b[off+4:])),
		timeDiff: int32(binary.BigEndian.Uint32(b[off+12:])),
		prev:     int32(binary.BigEndian.Uint32(b[off+16:])),
	}
}

func readRawSlot(b []byte, s int) int32 { return int32(binary.BigEndian.Uint32(b[40+4*s:])) }
