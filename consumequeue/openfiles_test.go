package consumequeue

import (
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
)

func TestOpenFilesForLimit(t *testing.T) {
	require.Equal(t, DefaultMaxOpenFiles, openFilesForLimit(1024))
	require.Equal(t, DefaultMaxOpenFiles, openFilesForLimit(0))
	require.Equal(t, 10000, openFilesForLimit(20000))
	require.Equal(t, MaxDerivedOpenFiles, openFilesForLimit(1<<20))
	require.Equal(t, MaxDerivedOpenFiles, openFilesForLimit(^uint64(0))) // RLIM_INFINITY

	var lim syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim))
	got := OpenFilesForProcess()
	require.Equal(t, openFilesForLimit(lim.Cur), got)
	require.LessOrEqual(t, uint64(got), max(lim.Cur, DefaultMaxOpenFiles), "within the descriptor limit")
}

// With OwnerSyncsFS, a spill or checkpoint write into a file the cache
// closed goes through a short-lived descriptor: no mapping, and no other
// queue's file closed for it. Growing a file still maps it. Readers see
// every unit, from memory or the files, before and after a reopen.
func TestWriteToClosedFileMapsNothing(t *testing.T) {
	var maps, opens atomic.Int64
	fs := vfs.WithErrors(vfs.NewMem(), vfs.InjectorFunc(func(op vfs.Op, path string) error {
		switch op {
		case vfs.OpMap:
			maps.Add(1)
		case vfs.OpOpen:
			opens.Add(1)
		}
		return nil
	}))
	const queues, perFile = 8, 1 << 20
	set, err := OpenSet(fs, "/cq", Options{UnitsPerFile: perFile, MaxOpenFiles: 1, OwnerSyncsFS: true})
	require.NoError(t, err)
	qs := make([]*Queue, queues)
	for i := range qs {
		qs[i], err = set.Queue("T", int32(i), true)
		require.NoError(t, err)
		putRange(t, qs[i], 0, 10, 0) // creates the file (mapped), 204 units of room
		_, err = set.MarkDirty()
		require.NoError(t, err)
	}
	require.LessOrEqual(t, set.OpenFiles(), 2)
	maps.Store(0)
	opens.Store(0)
	for round := int64(1); round < 10; round++ {
		for _, q := range qs {
			putRange(t, q, round*10, round*10+10, 0)
		}
		_, err := set.MarkFlushed()
		require.NoError(t, err)
	}
	require.Zero(t, maps.Load(), "writes into closed files map nothing")
	require.Greater(t, opens.Load(), int64(queues*4), "most went through a descriptor of their own")
	require.LessOrEqual(t, set.OpenFiles(), 2)
	for _, q := range qs {
		checkRange(t, q, 0, 100, 0)
	}
	// Past the file's 204 units of room it grows, through a mapped handle.
	for _, q := range qs {
		putRange(t, q, 100, 300, 0)
	}
	_, err = set.MarkFlushed()
	require.NoError(t, err)
	require.Positive(t, maps.Load())
	for _, q := range qs {
		checkRange(t, q, 0, 300, 0)
	}
	require.NoError(t, set.Close())

	set, err = OpenSet(fs, "/cq", Options{UnitsPerFile: perFile, MaxOpenFiles: 1, OwnerSyncsFS: true})
	require.NoError(t, err)
	for i := range queues {
		q, err := set.Queue("T", int32(i), false)
		require.NoError(t, err)
		require.Equal(t, int64(300), q.MaxOffset())
		checkRange(t, q, 0, 300, 0)
	}
	require.NoError(t, set.Close())
}
