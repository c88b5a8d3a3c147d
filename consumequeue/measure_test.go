package consumequeue

import (
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
)

// TestMeasureIdleQueues measures what idle queues cost: it creates
// CQ_MEASURE_QUEUES queues (8 per topic) of one unit each with the default
// options in a temporary directory (CQ_MEASURE_DIR, or the system's), syncs
// them, and reports the heap bytes, descriptors, mappings and disk blocks
// per queue; then it reopens the Set (recovery) and reports again. It is
// skipped unless CQ_MEASURE_QUEUES is set, e.g.
//
//	CQ_MEASURE_QUEUES=80000 go test -run TestMeasureIdleQueues -v -timeout 60m ./consumequeue
func TestMeasureIdleQueues(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("CQ_MEASURE_QUEUES"))
	if n <= 0 {
		t.Skip("set CQ_MEASURE_QUEUES to the number of queues to measure")
	}
	parent := os.Getenv("CQ_MEASURE_DIR")
	root, err := os.MkdirTemp(parent, "cq-measure-")
	require.NoError(t, err)
	defer os.RemoveAll(root)
	fds0, _ := procCount(t, root)
	heap0 := heapInUse()

	start := time.Now()
	set, err := OpenSet(vfs.Default(), root, Options{})
	require.NoError(t, err)
	for i := 0; i < n; i++ {
		topic, id := queueName(i)
		q, err := set.Queue(topic, id, true)
		require.NoError(t, err)
		require.NoError(t, q.Put(0, int64(i)*100, 100, 0))
	}
	require.NoError(t, set.SyncDirty())
	created := time.Since(start)
	report(t, "created", set, n, root, fds0, heap0, created)

	start = time.Now()
	require.NoError(t, set.Close())
	closed := time.Since(start)
	set = nil
	t.Logf("closed in %v", closed.Round(time.Millisecond))
	heap0 = heapInUse()
	start = time.Now()
	set, err = OpenSet(vfs.Default(), root, Options{})
	require.NoError(t, err)
	report(t, "reopened", set, n, root, fds0, heap0, time.Since(start))
	require.Len(t, set.Queues(), n)

	// Retention and truncation passes over idle queues open no file.
	start = time.Now()
	_, err = set.DeleteBefore(0)
	require.NoError(t, err)
	require.NoError(t, set.TruncatePhy(int64(n)*100))
	t.Logf("DeleteBefore and TruncatePhy over %d idle queues: %v", n, time.Since(start).Round(time.Millisecond))
	require.NoError(t, set.Close())
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func report(t *testing.T, what string, set *Set, n int, root string, fds0 int, heap0 uint64, took time.Duration) {
	heap := heapInUse()
	fds, maps := procCount(t, root)
	var files, dirs int
	var blocks, apparent int64
	require.NoError(t, filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			blocks += st.Blocks * 512
		}
		if d.IsDir() {
			dirs++
		} else {
			files++
			apparent += fi.Size()
		}
		return nil
	}))
	t.Logf("%s %d queues in %v: heap %d B/queue (%.1f MiB), %d descriptors and %d mappings open (cache %d), "+
		"%d files of %d B apparent, %d directories, %d disk bytes allocated (%d B/queue, files and directories)",
		what, n, took.Round(time.Millisecond), (int64(heap)-int64(heap0))/int64(n), float64(int64(heap)-int64(heap0))/(1<<20),
		fds-fds0, maps, set.OpenFiles(), files, apparent/int64(max(files, 1)), dirs, blocks, blocks/int64(n))
	runtime.KeepAlive(set)
}
