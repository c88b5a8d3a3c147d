package consumequeue

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
	"github.com/raftmq/raftmq/internal/vfs/vfstest"
)

// TestReopenOnFullTmpfs reopens queues whose last file has holes (it grew
// by extension, and only its first pages were written) on a tmpfs with no
// free page. A read of a hole through a shared mapping allocates a page on
// tmpfs, which on a full device is a SIGBUS: recovery must find the end of
// the units and check the rest of the file without touching a hole
// through the mapping, and zero stale bytes after the end (a crash's
// reordered writes) without needing space.
func TestReopenOnFullTmpfs(t *testing.T) {
	root := vfstest.SmallTmpfs(t, 4<<20)
	fs := vfs.Default()
	const perFile = 4096

	// Queue 3 of TopicTest: 410 units. The file grew 204 -> 408 -> 816
	// units (16,320 bytes, four pages); the units fill pages 0-2, page 3 is
	// a hole.
	q := openQueue(t, fs, root, perFile)
	putRange(t, q, 0, 410, 0)
	require.NoError(t, q.Close())

	// Queue 0 of TopicStale: 1,000 units in a file of 1,632 units (32,640
	// bytes, eight pages: units in pages 0-4), and bytes a crash left
	// after the end: in page 4 (after the last unit), and in page 6, with
	// holes in pages 5 and 7.
	q2, err := OpenQueue(fs, root, "TopicStale", 0, testOpts(t, perFile))
	require.NoError(t, err)
	putRange(t, q2, 0, 1000, 0)
	require.NoError(t, q2.Close())
	stalePath := filepath.Join(root, "TopicStale", "0", fileName(0))
	f, err := os.OpenFile(stalePath, os.O_RDWR, 0)
	require.NoError(t, err)
	junk := []byte{1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 9}
	_, err = f.WriteAt(junk, 1001*UnitSize)
	require.NoError(t, err)
	_, err = f.WriteAt(junk, 6*4096+100)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	blocks := func() int64 {
		fi, err := os.Stat(stalePath)
		require.NoError(t, err)
		return fi.Sys().(*syscall.Stat_t).Blocks
	}
	before := blocks()
	require.Equal(t, int64(1632*UnitSize), statSize(t, stalePath))

	vfstest.FillDisk(t, root)

	q = openQueue(t, fs, root, perFile)
	require.Equal(t, int64(410), q.MaxOffset())
	checkRange(t, q, 0, 410, 0)
	require.NoError(t, q.Close())

	q2, err = OpenQueue(fs, root, "TopicStale", 0, testOpts(t, perFile))
	require.NoError(t, err)
	require.Equal(t, int64(1000), q2.MaxOffset())
	checkRange(t, q2, 0, 1000, 0)
	require.NoError(t, q2.Close())
	data, err := os.ReadFile(stalePath)
	require.NoError(t, err)
	require.Equal(t, make([]byte, len(data)-1000*UnitSize), data[1000*UnitSize:], "stale bytes after the end were not zeroed")
	require.Equal(t, before, blocks(), "zeroing allocated the holes")
}

func statSize(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi.Size()
}
