package consumequeue

import (
	"fmt"
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

// With OwnerSyncsFS, the writer opens no file into the cache: creating a
// file, and a spill or checkpoint write into a file no reader has open, go
// through a short-lived descriptor: no mapping, and no other queue's file
// closed for it. So does growing one; only a file a reader opened is
// mapped again. Readers see every unit, from memory or the files, before
// and after a reopen.
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
		putRange(t, qs[i], 0, 10, 0)
		_, err = set.MarkDirty() // creates the file, 204 units of room
		require.NoError(t, err)
	}
	require.Zero(t, set.OpenFiles(), "the writer keeps no file open")
	require.Zero(t, maps.Load(), "nor maps one")
	require.Zero(t, opens.Load(), "a new file's first write goes through the descriptor that created it")
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
	// Past the file's 204 units of room it grows: a file the reads above
	// left open is mapped again, the others are not.
	open := int64(set.OpenFiles())
	require.Positive(t, open, "the reads opened files")
	maps.Store(0)
	for _, q := range qs {
		putRange(t, q, 100, 300, 0)
	}
	_, err = set.MarkFlushed()
	require.NoError(t, err)
	require.LessOrEqual(t, maps.Load(), open)
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

// With OwnerSyncsFS the writer grows a file that no reader has open
// through a descriptor of its own. A reader that opens the file in the
// middle of that growth maps it at its old size; the writer must then map
// it again, or the reader would read the units past the old end out of
// bounds. The injector opens the file from a reader exactly there: when
// the growth's Truncate is about to run.
func TestReaderOpensFileDuringGrowth(t *testing.T) {
	var (
		q       *Queue
		armed   atomic.Bool
		readErr error
		opened  bool
	)
	fs := vfs.WithErrors(vfs.NewMem(), vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if op == vfs.OpTruncate && armed.CompareAndSwap(true, false) {
			var u Unit
			if u, readErr = q.Get(0); readErr == nil && u != unitAt(0, 0) {
				readErr = fmt.Errorf("read %v, want %v", u, unitAt(0, 0))
			}
			opened = true
		}
		return nil
	}))
	// No bound on open files: eviction would wait for the writer's lock,
	// which the injector's caller holds.
	set, err := OpenSet(fs, "/cq", Options{UnitsPerFile: 1 << 20, MaxOpenFiles: -1, OwnerSyncsFS: true})
	require.NoError(t, err)
	q, err = set.Queue("T", 0, true)
	require.NoError(t, err)
	putRange(t, q, 0, 100, 0)
	_, err = set.MarkFlushed() // creates the file, 204 units of room
	require.NoError(t, err)
	require.Zero(t, set.OpenFiles())
	armed.Store(true)
	putRange(t, q, 100, 1100, 0) // the spill at 1,024 grows the file
	require.True(t, opened, "the file grew")
	require.NoError(t, readErr)
	require.Equal(t, 1, set.OpenFiles(), "the reader's file stays open")
	checkRange(t, q, 0, 1100, 0)
	require.NoError(t, set.Close())
}
