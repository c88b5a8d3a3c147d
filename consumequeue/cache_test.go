package consumequeue

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
)

// queueName is the topic and id of the i-th test queue of a Set: 8 queues
// per topic.
func queueName(i int) (string, int32) { return fmt.Sprintf("T%03d", i/8), int32(i % 8) }

func fileSize(t testing.TB, fs vfs.FS, path string) int64 {
	t.Helper()
	fi, err := fs.Stat(path)
	require.NoError(t, err)
	return fi.Size()
}

// A file starts with room for firstFileUnits units and doubles as units
// are written, up to UnitsPerFile; every file but the last is full.
func TestFileGrowth(t *testing.T) {
	forEachFS(t, func(t *testing.T, fs vfs.FS, root string) {
		const perFile = 1000
		q := openQueue(t, fs, root, perFile)
		dir := vfs.Join(root, "TopicTest", "3")
		f0 := vfs.Join(dir, fileName(0))
		f1 := vfs.Join(dir, fileName(perFile*UnitSize))
		steps := []struct{ units, size int64 }{
			{1, 204}, {204, 204}, {205, 408}, {409, 816}, {817, 1000}, {1000, 1000},
		}
		for _, st := range steps {
			putRange(t, q, q.MaxOffset(), st.units, 0)
			require.NoError(t, q.WriteBuffered())
			require.Equal(t, st.size*UnitSize, fileSize(t, fs, f0), "after %d units", st.units)
			require.NoError(t, q.checkInvariants())
		}
		// A batch larger than one doubling grows the file once, far enough.
		putBuffered(t, q, 1000, 1500, 0)
		require.NoError(t, q.Flush())
		require.NoError(t, q.WriteBuffered())
		require.Equal(t, int64(816*UnitSize), fileSize(t, fs, f1))
		checkRange(t, q, 0, 1500, 0)
		require.NoError(t, q.Close())

		q = openQueue(t, fs, root, perFile)
		require.Equal(t, int64(1500), q.MaxOffset())
		checkRange(t, q, 0, 1500, 0)
		putRange(t, q, 1500, 2001, 0)
		require.NoError(t, q.WriteBuffered())
		require.Equal(t, int64(perFile*UnitSize), fileSize(t, fs, f1))
		require.Equal(t, int64(204*UnitSize), fileSize(t, fs, vfs.Join(dir, fileName(2*perFile*UnitSize))))
		require.NoError(t, q.Close())
		q = openQueue(t, fs, root, perFile)
		checkRange(t, q, 0, 2001, 0)
		require.NoError(t, q.Close())
	})
}

// ResetTo creates a file large enough for its blank units.
func TestResetToSizesForBlanks(t *testing.T) {
	fs := vfs.NewMem()
	q := openQueue(t, fs, "/cq", 1000)
	require.NoError(t, q.ResetTo(1300)) // 300 blanks in file 1000
	require.Equal(t, int64(408*UnitSize), fileSize(t, fs, qdir+fileName(1000*UnitSize)))
	putRange(t, q, 1300, 1310, 0)
	require.NoError(t, q.Close())
	q = openQueue(t, fs, "/cq", 1000)
	require.Equal(t, int64(1300), q.MinOffset())
	checkRange(t, q, 1300, 1310, 0)
	require.NoError(t, q.Close())
}

// Units written across growth steps survive a crash as far as they were
// synced, whatever part of the unsynced growth and writes the crash kept
// or tore.
func TestCrashWhileGrowing(t *testing.T) {
	const perFile = 600
	torn := 0
	for seed := uint64(0); seed < 60; seed++ {
		rng := newRand(seed)
		fs := vfs.NewMem()
		opts := Options{UnitsPerFile: perFile, MaxOpenFiles: 1 + int(seed%3)}
		q, err := OpenQueue(fs, "/cq", "T", 0, opts)
		require.NoError(t, err)
		end, synced := int64(0), int64(0)
		for end < 1500 {
			n := 1 + rng.Int64N(150)
			putBuffered(t, q, end, end+n, 0)
			end += n
			require.NoError(t, q.Flush())
			require.NoError(t, q.WriteBuffered()) // unsynced writes and growth
			if rng.IntN(4) == 0 {
				require.NoError(t, q.Sync())
				synced = end
			}
		}
		warnings := 0
		crashed := fs.CrashClone(rng, []float64{0, 0.5, 1}[seed%3])
		q2, err := OpenQueue(crashed, "/cq", "T", 0,
			Options{UnitsPerFile: perFile, Logger: countingLogger(&warnings)})
		require.NoError(t, err, "seed %d", seed)
		max := q2.MaxOffset()
		require.GreaterOrEqual(t, max, synced, "seed %d", seed)
		require.LessOrEqual(t, max, end, "seed %d", seed)
		require.NoError(t, q2.checkInvariants())
		if warnings > 0 {
			torn++
		}
		// A unit torn inside its tags reads as valid; the owner's replay
		// finds it and truncates.
		if err := replay(t, q2, synced, end); err != nil {
			require.ErrorIs(t, err, ErrOffsetMismatch, "seed %d", seed)
			require.NoError(t, q2.TruncateTo(synced))
			require.NoError(t, replay(t, q2, synced, end))
		}
		checkRange(t, q2, 0, end, 0)
		require.NoError(t, q2.Close())
		q3, err := OpenQueue(crashed.CrashClone(rng, 0), "/cq", "T", 0, Options{UnitsPerFile: perFile})
		require.NoError(t, err)
		checkRange(t, q3, 0, end, 0)
		require.Equal(t, end, q3.MaxOffset())
		require.NoError(t, q3.Close())
		require.NoError(t, q.Close())
	}
	t.Logf("%d runs repaired a crashed tail", torn)
	require.Positive(t, torn)
}

func replay(t testing.TB, q *Queue, from, to int64) error {
	for i := from; i < to; i++ {
		u := unitAt(i, 0)
		if err := q.Put(u.Offset, u.PhyOffset, u.Size, u.TagsCode); err != nil {
			return err
		}
	}
	return nil
}

func countingLogger(n *int) *slog.Logger { return slog.New(countWarnings{n}) }

// TestCrashTinyCache runs 50 queues through a Set that keeps 2 files open,
// so nearly every access closes another queue's file, with writes, syncs of
// single queues, SyncDirty, whole-FS syncs (MarkDirty, SyncFS, SyncedByFS)
// and reads; then loses power and checks every queue: no synced unit lost,
// every surviving unit where it was written.
func TestCrashTinyCache(t *testing.T) {
	const queues = 50
	for seed := uint64(0); seed < 12; seed++ {
		perFile := []int{7, 300}[seed%2]
		rng := newRand(seed)
		mem := vfs.NewMem()
		opts := Options{UnitsPerFile: perFile, MaxOpenFiles: 2}
		set, err := OpenSet(mem, "/cq", opts)
		require.NoError(t, err)
		qs := make([]*Queue, queues)
		end := make([]int64, queues)    // units put (written or buffered)
		synced := make([]int64, queues) // durable
		for i := range qs {
			topic, id := queueName(i)
			qs[i], err = set.Queue(topic, id, true)
			require.NoError(t, err)
		}
		for step := 0; step < 600; step++ {
			i := rng.IntN(queues)
			q := qs[i]
			switch r := rng.IntN(20); {
			case r < 8:
				n := 1 + rng.Int64N(int64(perFile))
				putBuffered(t, q, end[i], end[i]+n, 0)
				end[i] += n
				switch rng.IntN(3) {
				case 0:
					require.NoError(t, q.Flush())
				case 1:
					require.NoError(t, q.Flush())
					require.NoError(t, q.WriteBuffered())
				}
			case r < 12:
				putRange(t, q, end[i], end[i]+1, 0)
				end[i]++
			case r < 14:
				require.NoError(t, q.Sync())
				synced[i] = end[i]
			case r == 14:
				require.NoError(t, set.SyncDirty())
				copy(synced, end)
			case r == 15:
				marks, err := set.MarkDirty()
				require.NoError(t, err)
				require.NoError(t, mem.SyncFS("/cq"))
				set.SyncedByFS(marks)
				copy(synced, end)
			default:
				if m := q.MaxOffset(); m > 0 {
					off := rng.Int64N(m)
					u, err := q.Get(off)
					require.NoError(t, err)
					require.Equal(t, unitAt(off, 0), u)
				}
			}
			require.LessOrEqual(t, set.OpenFiles(), 2, "seed %d step %d", seed, step)
		}
		keep := []float64{0, 0.5, 1}[seed%3]
		crashed := mem.CrashClone(rng, keep)
		set2, err := OpenSet(crashed, "/cq", opts)
		require.NoError(t, err, "seed %d", seed)
		require.LessOrEqual(t, set2.OpenFiles(), 2)
		for i := range qs {
			topic, id := queueName(i)
			q2, err := set2.Queue(topic, id, false)
			require.NoError(t, err)
			max := q2.MaxOffset()
			require.GreaterOrEqual(t, max, synced[i], "seed %d queue %d", seed, i)
			require.LessOrEqual(t, max, end[i], "seed %d queue %d", seed, i)
			require.NoError(t, q2.checkInvariants())
			checkRange(t, q2, 0, max, 0)
			if err := replay(t, q2, synced[i], end[i]); err != nil {
				require.ErrorIs(t, err, ErrOffsetMismatch, "seed %d queue %d", seed, i)
				require.NoError(t, q2.TruncateTo(synced[i]))
				require.NoError(t, replay(t, q2, synced[i], end[i]))
			}
		}
		require.NoError(t, set2.SyncDirty())
		require.LessOrEqual(t, set2.OpenFiles(), 2)
		set3, err := OpenSet(crashed.CrashClone(rng, 0), "/cq", opts)
		require.NoError(t, err)
		for i := range qs {
			topic, id := queueName(i)
			q3, err := set3.Queue(topic, id, false)
			require.NoError(t, err)
			require.Equal(t, end[i], q3.MaxOffset(), "seed %d queue %d", seed, i)
			checkRange(t, q3, 0, end[i], 0)
		}
		require.NoError(t, set3.Close())
		require.NoError(t, set2.Close())
		require.NoError(t, set.Close())
	}
}

// Closing a file that holds unsynced units syncs it first: the units
// survive a crash even though the queue itself was never synced.
func TestEvictionSyncsDirtyFile(t *testing.T) {
	mem := vfs.NewMem()
	set, err := OpenSet(mem, "/cq", Options{UnitsPerFile: 7, MaxOpenFiles: 1})
	require.NoError(t, err)
	a, err := set.Queue("a", 0, true)
	require.NoError(t, err)
	putRange(t, a, 0, 3, 0)
	require.NoError(t, a.WriteBuffered())
	require.True(t, a.needSync.Load())
	b, err := set.Queue("b", 0, true)
	require.NoError(t, err)
	putRange(t, b, 0, 1, 0)
	require.NoError(t, b.WriteBuffered()) // opens b's file: a's is closed
	require.Equal(t, 1, set.OpenFiles())
	a.mu.RLock()
	require.Nil(t, a.mu.segs[0].h.Load(), "a's file was closed")
	require.False(t, a.mu.segs[0].dirty, "and synced")
	a.mu.RUnlock()

	crashed := mem.CrashClone(newRand(1), 0)
	set2, err := OpenSet(crashed, "/cq", Options{UnitsPerFile: 7, MaxOpenFiles: 1})
	require.NoError(t, err)
	a2, err := set2.Queue("a", 0, false)
	require.NoError(t, err)
	require.Equal(t, int64(3), a2.MaxOffset())
	checkRange(t, a2, 0, 3, 0)
	require.NoError(t, set2.Close())
	require.NoError(t, set.Close())
}

// A sync that fails while an idle file is closed becomes the queue's
// sticky error: its next Sync reports it rather than claiming durability.
func TestEvictionSyncFailureIsSticky(t *testing.T) {
	var failA atomic.Bool
	fs := vfs.WithErrors(vfs.NewMem(), vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if failA.Load() && op == vfs.OpSync && strings.HasPrefix(path, "/cq/a/") {
			return vfs.ErrInjected
		}
		return nil
	}))
	set, err := OpenSet(fs, "/cq", Options{UnitsPerFile: 7, MaxOpenFiles: 1})
	require.NoError(t, err)
	a, err := set.Queue("a", 0, true)
	require.NoError(t, err)
	putRange(t, a, 0, 3, 0)
	require.NoError(t, a.WriteBuffered())
	failA.Store(true)
	b, err := set.Queue("b", 0, true)
	require.NoError(t, err)
	putRange(t, b, 0, 1, 0)
	require.NoError(t, b.WriteBuffered()) // closes a's file, whose sync fails
	failA.Store(false)
	require.ErrorIs(t, a.Sync(), vfs.ErrInjected)
	require.ErrorIs(t, set.SyncDirty(), vfs.ErrInjected)
	checkRange(t, a, 0, 3, 0) // reads still work, reopening the file
	require.NoError(t, b.Sync())
	require.NoError(t, set.Close())
}

// A queue of many files opens with at most MaxOpenFiles of them open, and
// reads and retention reopen them as needed.
func TestManyFilesTinyCache(t *testing.T) {
	forEachFS(t, func(t *testing.T, fs vfs.FS, root string) {
		opts := testOpts(t, 7)
		opts.MaxOpenFiles = 2
		q, err := OpenQueue(fs, root, "TopicTest", 3, opts)
		require.NoError(t, err)
		putRange(t, q, 0, 140, 0) // 20 files
		require.LessOrEqual(t, q.cache.open.Load(), int64(2))
		require.NoError(t, q.Close())
		require.Zero(t, q.cache.open.Load())

		q, err = OpenQueue(fs, root, "TopicTest", 3, opts)
		require.NoError(t, err)
		require.Equal(t, int64(1), q.cache.open.Load(), "only the last file stays open after recovery")
		checkRange(t, q, 0, 140, 0)
		units, next, err := q.Read(0, 1000, nil)
		require.NoError(t, err)
		require.Len(t, units, 140)
		require.Equal(t, int64(140), next)
		require.LessOrEqual(t, q.cache.open.Load(), int64(2))
		n, err := q.DeleteBefore(unitAt(70, 0).PhyOffset)
		require.NoError(t, err)
		require.Equal(t, 10, n)
		require.NoError(t, q.TruncatePhy(unitAt(100, 0).PhyOffset))
		require.Equal(t, int64(100), q.MaxOffset())
		checkRange(t, q, 70, 100, 0)
		require.LessOrEqual(t, q.cache.open.Load(), int64(2))
		require.NoError(t, q.Close())
	})
}

// Idle queues cost no file access: DeleteBefore and TruncatePhy that have
// nothing to do leave closed files closed.
func TestIdleQueuesStayClosed(t *testing.T) {
	base := vfs.NewMem()
	fs, opens := vfs.Counting(base, vfs.OpOpen)
	set, err := OpenSet(fs, "/cq", Options{UnitsPerFile: 7, MaxOpenFiles: 1})
	require.NoError(t, err)
	for i := 0; i < 10; i++ {
		topic, id := queueName(i)
		q, err := set.Queue(topic, id, true)
		require.NoError(t, err)
		putRange(t, q, 0, 10, 0)
	}
	require.NoError(t, set.SyncDirty())
	// The first pass learns each queue's first unit.
	_, err = set.DeleteBefore(0)
	require.NoError(t, err)
	before := opens.Load()
	_, err = set.DeleteBefore(unitAt(0, 0).PhyOffset)
	require.NoError(t, err)
	require.NoError(t, set.TruncatePhy(unitAt(10, 0).PhyOffset))
	require.NoError(t, set.SyncDirty())
	require.Equal(t, before, opens.Load(), "no file opened")
	require.NoError(t, set.Close())
}

// procCount counts the process's open descriptors and the mappings of
// files under root.
func procCount(t testing.TB, root string) (fds, maps int) {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	b, err := os.ReadFile("/proc/self/maps")
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, root) {
			maps++
		}
	}
	return len(ents), maps
}

// The process's descriptors and mappings of queue files stay within
// MaxOpenFiles however many queues are written and read.
func TestOpenFilesBounded(t *testing.T) {
	const limit, queues = 16, 150
	root := t.TempDir()
	fds0, _ := procCount(t, root)
	set, err := OpenSet(vfs.Default(), root, Options{UnitsPerFile: 7, MaxOpenFiles: limit})
	require.NoError(t, err)
	for i := 0; i < queues; i++ {
		topic, id := queueName(i)
		q, err := set.Queue(topic, id, true)
		require.NoError(t, err)
		putRange(t, q, 0, int64(1+i%10), 0)
	}
	for i := 0; i < queues; i++ {
		topic, id := queueName(i)
		q, err := set.Queue(topic, id, false)
		require.NoError(t, err)
		checkRange(t, q, 0, q.MaxOffset(), 0)
	}
	require.NoError(t, set.SyncDirty())
	fds, maps := procCount(t, root)
	require.LessOrEqual(t, set.OpenFiles(), limit)
	require.LessOrEqual(t, fds-fds0, limit, "descriptors")
	require.LessOrEqual(t, maps, limit, "mappings")
	require.NoError(t, set.Close())

	// Reopening every queue (recovery) is bounded too.
	set, err = OpenSet(vfs.Default(), root, Options{UnitsPerFile: 7, MaxOpenFiles: limit})
	require.NoError(t, err)
	require.Len(t, set.Queues(), queues)
	fds, maps = procCount(t, root)
	require.LessOrEqual(t, set.OpenFiles(), limit)
	require.LessOrEqual(t, fds-fds0, limit, "descriptors")
	require.LessOrEqual(t, maps, limit, "mappings")
	require.NoError(t, set.Close())
	fds, maps = procCount(t, root)
	require.LessOrEqual(t, fds, fds0)
	require.Zero(t, maps)

	// A negative bound keeps every file open.
	set, err = OpenSet(vfs.Default(), root, Options{UnitsPerFile: 7, MaxOpenFiles: -1})
	require.NoError(t, err)
	for _, q := range set.Queues() {
		_, err := q.Get(0)
		require.NoError(t, err)
	}
	require.GreaterOrEqual(t, set.OpenFiles(), queues)
	require.NoError(t, set.Close())
}

// TestConcurrentReadersWhileEvicting runs an apply-loop writer over many
// queues, a syncer, and readers against a Set that keeps 3 files open, so
// files are closed under the readers' feet all the time; run it with
// -race. Readers must only ever see correct units, and on the OS file
// system a read through an unmapped file would crash the test.
func TestConcurrentReadersWhileEvicting(t *testing.T) {
	forEachFS(t, func(t *testing.T, fs vfs.FS, root string) {
		const queues, limit = 12, 3
		set, err := OpenSet(fs, root, Options{UnitsPerFile: 50, MaxOpenFiles: limit})
		require.NoError(t, err)
		qs := make([]*Queue, queues)
		for i := range qs {
			topic, id := queueName(i)
			qs[i], err = set.Queue(topic, id, true)
			require.NoError(t, err)
		}
		var (
			done     = make(chan struct{})
			wg       sync.WaitGroup
			reads    atomic.Int64
			maxOpen  atomic.Int64
			failures = make(chan error, 16)
		)
		report := func(err error) {
			select {
			case failures <- err:
			default:
			}
		}
		const readers = 3
		for r := 0; r < readers; r++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := newRand(uint64(r))
				for {
					select {
					case <-done:
						return
					default:
					}
					q := qs[rng.IntN(queues)]
					lo, hi := q.MinOffset(), q.MaxOffset()
					if hi == lo {
						continue
					}
					off := lo + rng.Int64N(hi-lo)
					units, _, err := q.Read(off, 1+rng.IntN(80), nil)
					if err != nil {
						if !errors.Is(err, ErrOffsetOutOfRange) {
							report(err)
						}
						continue
					}
					for _, u := range units {
						if u != unitAt(u.Offset, 0) {
							report(fmt.Errorf("read %v, want %v", u, unitAt(u.Offset, 0)))
						}
					}
					if u, err := q.Get(off); err == nil && u != unitAt(off, 0) {
						report(fmt.Errorf("get %v, want %v", u, unitAt(off, 0)))
					}
					reads.Add(1)
					if n := int64(set.OpenFiles()); n > maxOpen.Load() {
						maxOpen.Store(n)
					}
				}
			}()
		}
		wg.Add(1)
		go func() { // a flusher, as the store's checkpoint
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				if err := set.SyncDirty(); err != nil {
					report(err)
				}
			}
		}()
		rng := newRand(99)
		end := make([]int64, queues)
		for round := 0; round < 400; round++ {
			i := rng.IntN(queues)
			n := 1 + rng.Int64N(30)
			putBuffered(t, qs[i], end[i], end[i]+n, 0)
			end[i] += n
			require.NoError(t, qs[i].Flush())
			switch round % 50 {
			case 17:
				end[i] -= min(end[i]-qs[i].MinOffset(), 5)
				require.NoError(t, qs[i].TruncateTo(end[i]))
			case 33:
				if end[i] > 60 {
					_, err := qs[i].DeleteBefore(unitAt(end[i]-60, 0).PhyOffset)
					require.NoError(t, err)
				}
			}
		}
		for reads.Load() < 2000 {
			select {
			case err := <-failures:
				require.NoError(t, err)
			default:
			}
			putRange(t, qs[0], end[0], end[0]+1, 0)
			end[0]++
		}
		close(done)
		wg.Wait()
		select {
		case err := <-failures:
			require.NoError(t, err)
		default:
		}
		// Each of the 5 goroutines opens at most 2 files past the bound
		// before it evicts (one read or flush spans at most 2 files).
		require.LessOrEqual(t, maxOpen.Load(), int64(limit+2*(readers+2)))
		qs[0].Get(qs[0].MinOffset()) // an access with nothing in flight trims the excess
		require.LessOrEqual(t, set.OpenFiles(), limit)
		for i, q := range qs {
			checkRange(t, q, q.MinOffset(), end[i], 0)
		}
		require.NoError(t, set.Close())
		require.Zero(t, set.OpenFiles())
	})
}

// TestConcurrentReadersWhileGrowing reads the tail of queues while their
// last file grows (a new mapping replaces the old one); run it with -race.
// On the OS file system a read through the old, unmapped, range would crash
// the test.
func TestConcurrentReadersWhileGrowing(t *testing.T) {
	forEachFS(t, func(t *testing.T, fs vfs.FS, root string) {
		readTailWhileGrowing(t, fs, root, Options{UnitsPerFile: 4000, MaxOpenFiles: 2}, 6, 40, nil, nil)
	})
}

// With OwnerSyncsFS the writer grows a file no reader has open through a
// descriptor of its own, while readers open it (mapped at the size they
// find) and the cache closes it again: a reader that opened the file just
// before the growth must see it mapped at its new size once the units
// past its old end are visible. Readers read the tail of the queue being
// written and the head of the previous one, so that the two files take
// turns in a cache of one.
func TestConcurrentReadersWhileGrowingClosed(t *testing.T) {
	forEachFS(t, func(t *testing.T, fs vfs.FS, root string) {
		opts := Options{UnitsPerFile: 4000, MaxOpenFiles: 1, OwnerSyncsFS: true}
		readPrev := func(_, prev *Queue) error {
			if prev == nil {
				return nil
			}
			u, err := prev.Get(0)
			if err == nil && u != unitAt(0, 0) {
				err = fmt.Errorf("previous queue: read %v, want %v", u, unitAt(0, 0))
			}
			return err
		}
		markFlushed := func(set *Set, rng *rand.Rand) {
			if rng.Int64N(20) == 0 {
				_, err := set.MarkFlushed()
				require.NoError(t, err)
			}
		}
		readTailWhileGrowing(t, fs, root, opts, 4, 1100, readPrev, markFlushed)
	})
}

// readTailWhileGrowing writes UnitsPerFile+300 units, in flushes of 1-40,
// to each of queues queues of a Set opened with opts in turn, while two
// readers read the last span units of the queue being written, check them,
// and run also (if not nil) with it and the queue written before it.
// afterFlush (if not nil) runs after each flush. Every queue must hold
// every unit at the end.
func readTailWhileGrowing(t *testing.T, fs vfs.FS, root string, opts Options, queues int, span int64,
	also func(q, prev *Queue) error, afterFlush func(set *Set, rng *rand.Rand)) {
	perFile := int64(opts.UnitsPerFile)
	set, err := OpenSet(fs, root, opts)
	require.NoError(t, err)
	var prev *Queue
	for i := 0; i < queues; i++ {
		topic, id := queueName(i)
		q, err := set.Queue(topic, id, true)
		require.NoError(t, err)
		done := make(chan struct{})
		var wg sync.WaitGroup
		failures := make(chan error, 4)
		for r := 0; r < 2; r++ {
			wg.Add(1)
			go func(prev *Queue) {
				defer wg.Done()
				for {
					select {
					case <-done:
						return
					default:
					}
					hi := q.MaxOffset()
					units, _, err := q.Read(max(hi-span, 0), int(span), nil)
					if err == nil {
						for _, u := range units {
							if u != unitAt(u.Offset, 0) {
								err = fmt.Errorf("read %v, want %v", u, unitAt(u.Offset, 0))
								break
							}
						}
					}
					if err == nil && also != nil {
						err = also(q, prev)
					}
					if err != nil {
						select {
						case failures <- err:
						default:
						}
						return
					}
				}
			}(prev)
		}
		rng := newRand(uint64(i))
		for end := int64(0); end < perFile+300; {
			n := 1 + rng.Int64N(40)
			putBuffered(t, q, end, end+n, 0)
			end += n
			require.NoError(t, q.Flush())
			if afterFlush != nil {
				afterFlush(set, rng)
			}
		}
		close(done)
		wg.Wait()
		select {
		case err := <-failures:
			require.NoError(t, err)
		default:
		}
		checkRange(t, q, 0, perFile+300, 0)
		prev = q
	}
	require.NoError(t, set.Close())
}
