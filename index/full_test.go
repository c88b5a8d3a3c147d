package index

import (
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
	"github.com/raftmq/raftmq/internal/vfs/vfstest"
)

// An index file is sparse: its slot table is mostly holes. On a full tmpfs
// a read of a hole through a mapping needs a page the device cannot give
// (SIGBUS), so slots are read with ReadAt or from memory. Opening,
// querying and putting on a full tmpfs must report, not crash.
func TestIndexOnFullTmpfs(t *testing.T) {
	dir := vfstest.SmallTmpfs(t, 8<<20)
	fs := vfs.Default()
	// 2M slots: an 8 MiB slot table, as large as the device, all holes
	// but a few pages.
	opts := Options{SlotCount: 2_000_000, MaxEntries: 1000}
	x, err := Open(fs, dir+"/index", opts)
	require.NoError(t, err)
	for i := 0; i < 100; i++ {
		require.NoError(t, x.Put(fmt.Sprintf("t#k%d", i), int64(i*100), 1700000000000+int64(i)))
	}
	_, err = x.Sync()
	require.NoError(t, err)
	require.NoError(t, x.Close())

	ballast := vfstest.FillDisk(t, dir)
	x, err = Open(fs, dir+"/index", opts)
	require.NoError(t, err, "open on a full device")
	for _, k := range []int{0, 57, 99} {
		got, err := x.Query(fmt.Sprintf("t#k%d", k), 10, 0, 1<<62)
		require.NoError(t, err)
		require.Equal(t, []int64{int64(k * 100)}, got)
	}
	got, err := x.Query("t#absent", 10, 0, 1<<62)
	require.NoError(t, err)
	require.Empty(t, got)
	// A put that needs a new page fails with no space; nothing crashes.
	var perr error
	for i := 100; i < 1000 && perr == nil; i++ {
		perr = x.Put(fmt.Sprintf("t#k%d", i), int64(i*100), 1700000000000+int64(i))
		if perr == nil {
			perr = x.Flush()
		}
	}
	require.True(t, vfs.IsNoSpace(perr), "put on a full device: %v", perr)
	x.Close()
	require.NoError(t, os.Remove(ballast))
}
