package consumequeue

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
)

// testWriter sends log lines to t.Log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func testOpts(t testing.TB, perFile int) Options {
	h := slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})
	return Options{UnitsPerFile: perFile, Logger: slog.New(h)}
}

// forEachFS runs f on the OS file system in a temporary directory and on a
// fresh MemFS.
func forEachFS(t *testing.T, f func(t *testing.T, fs vfs.FS, root string)) {
	t.Run("os", func(t *testing.T) { f(t, vfs.Default(), t.TempDir()) })
	t.Run("mem", func(t *testing.T) { f(t, vfs.NewMem(), "/data/cq") })
}

// unitAt is the unit test queues hold at offset i in generation gen (0..9):
// PhyOffsets increase and never overlap whatever generations are mixed.
func unitAt(i int64, gen int64) Unit {
	return Unit{Offset: i, PhyOffset: i*100 + gen, Size: int32(20 + i%50), TagsCode: i%3 + 10*gen}
}

func put(t testing.TB, q *Queue, u Unit) {
	t.Helper()
	require.NoError(t, q.Put(u.Offset, u.PhyOffset, u.Size, u.TagsCode))
}

func putRange(t testing.TB, q *Queue, from, to, gen int64) {
	t.Helper()
	for i := from; i < to; i++ {
		put(t, q, unitAt(i, gen))
	}
}

func checkRange(t testing.TB, q *Queue, from, to, gen int64) {
	t.Helper()
	require.NoError(t, q.checkInvariants())
	for i := from; i < to; i++ {
		u, err := q.Get(i)
		require.NoError(t, err, "offset %d", i)
		require.Equal(t, unitAt(i, gen), u, "offset %d", i)
	}
}

func openQueue(t testing.TB, fs vfs.FS, root string, perFile int) *Queue {
	t.Helper()
	q, err := OpenQueue(fs, root, "TopicTest", 3, testOpts(t, perFile))
	require.NoError(t, err)
	require.NoError(t, q.checkInvariants())
	t.Cleanup(func() { require.NoError(t, q.checkInvariants()) })
	return q
}

func queueFiles(t testing.TB, fs vfs.FS, root string) []string {
	t.Helper()
	names, err := fs.List(vfs.Join(root, "TopicTest", "3"))
	require.NoError(t, err)
	return names
}
