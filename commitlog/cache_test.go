package commitlog

import (
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/raftmq/raftmq/internal/vfs"
)

// resident returns the fraction of the file's pages in [off, off+n) that
// are in the page cache, from a fresh mapping of its own.
func resident(t *testing.T, path string, off, n int64) float64 {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), off, int(n), unix.PROT_READ, unix.MAP_SHARED)
	require.NoError(t, err)
	defer unix.Munmap(m)
	ps := int64(os.Getpagesize())
	vec := make([]byte, (n+ps-1)/ps)
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0])))
	require.Zero(t, errno, "mincore")
	in := 0
	for _, v := range vec {
		in += int(v & 1)
	}
	return float64(in) / float64(len(vec))
}

// TestCacheWindowReleasesSyncedPages appends 56 MiB to a real file with a
// 16 MiB window and checks that the oldest synced bytes left the page
// cache, the newest stayed, and every entry still reads back intact.
func TestCacheWindowReleasesSyncedPages(t *testing.T) {
	dir := t.TempDir()
	var st unix.Statfs_t
	require.NoError(t, unix.Statfs(dir, &st))
	if st.Type == unix.TMPFS_MAGIC {
		t.Skip("tmpfs keeps every page in memory; POSIX_FADV_DONTNEED does nothing there")
	}
	const seg = 64 << 20
	l, err := Open(vfs.Default(), dir, Options{SegmentSize: seg, CacheWindow: DropChunk, WarmAhead: -1, DirectIO: -1})
	require.NoError(t, err)
	defer l.Close()
	w := writerT(t, l)
	const size = 64 << 10
	n := uint64(56<<20) / uint64(EncodedSize(size))
	for i := uint64(1); i <= n; i++ {
		require.NoError(t, w.AppendSync(Entry{Index: i, Term: 1, Data: body(i, size)}))
		if i == n/4 {
			// Read the first quarter through the log's own mapping before
			// it is released, so the release has mapped pages to unmap.
			ents, err := l.Entries(1, i+1, 1<<40)
			require.NoError(t, err)
			require.Len(t, ents, int(i))
		}
	}

	path := filepath.Join(dir, segmentName(0))
	end := l.EndPosition()
	limit := (end - DropChunk) / DropChunk * DropChunk
	require.GreaterOrEqual(t, limit, int64(2*DropChunk), "enough was written to release two chunks")
	require.Less(t, resident(t, path, 0, limit), 0.05, "bytes more than the window behind the end are released")
	require.Greater(t, resident(t, path, limit, end/4096*4096-limit), 0.95, "the window stays cached")

	for i := uint64(1); i <= n; i++ {
		got, err := l.Entries(i, i+1, 1<<40)
		require.NoError(t, err)
		require.Equal(t, body(i, size), got[0].Data, "entry %d after release", i)
	}
}

// TestCacheWindowOff keeps every page when CacheWindow is negative.
func TestCacheWindowOff(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(vfs.Default(), dir, Options{SegmentSize: 64 << 20, CacheWindow: -1, WarmAhead: -1, DirectIO: -1})
	require.NoError(t, err)
	defer l.Close()
	w := writerT(t, l)
	for i := uint64(1); i <= 600; i++ {
		require.NoError(t, w.AppendSync(Entry{Index: i, Term: 1, Data: body(i, 64<<10)}))
	}
	require.Greater(t, resident(t, filepath.Join(dir, segmentName(0)), 0, 32<<20), 0.95)
}
