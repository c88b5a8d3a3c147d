package consumequeue

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
)

func putBuffered(t testing.TB, q *Queue, from, to, gen int64) {
	t.Helper()
	for i := from; i < to; i++ {
		u := unitAt(i, gen)
		require.NoError(t, q.PutBuffered(u.Offset, u.PhyOffset, u.Size, u.TagsCode))
	}
}

// countingFS counts the WriteAt calls that reach the files of fs.
func countingFS(fs vfs.FS) (vfs.FS, *atomic.Int64) { return vfs.Counting(fs, vfs.OpWrite) }

// Buffered units are invisible until Flush, which makes them readable from
// memory; they are written, with one WriteAt per file, at a spill boundary
// (here each file's start: UnitsPerFile is below spillUnits), by
// WriteBuffered, Sync, Close, or the next Flush that passes a boundary.
func TestPutBufferedFlush(t *testing.T) {
	forEachFS(t, func(t *testing.T, base vfs.FS, root string) {
		fs, writes := countingFS(base)
		q := openQueue(t, fs, root, 7)
		putBuffered(t, q, 0, 20, 0)
		require.Zero(t, q.MaxOffset(), "nothing visible before Flush")
		_, err := q.Get(0)
		require.ErrorIs(t, err, ErrOffsetOutOfRange)
		units, next, err := q.Read(0, 10, nil)
		require.NoError(t, err)
		require.Empty(t, units)
		require.Zero(t, next)
		require.Zero(t, writes.Load(), "nothing written before Flush")
		require.NoError(t, q.WriteBuffered())
		require.Zero(t, writes.Load(), "WriteBuffered writes only visible units")
		require.NoError(t, q.checkInvariants())

		require.NoError(t, q.Flush())
		require.Equal(t, int64(20), q.MaxOffset())
		require.Equal(t, int64(2), writes.Load(), "one write per file up to the last file start: [0,7) [7,14)")
		checkRange(t, q, 0, 20, 0) // 14..19 from memory
		require.Equal(t, []string{fileName(0), fileName(7 * UnitSize)}, queueFiles(t, fs, root))

		require.NoError(t, q.Flush(), "an empty flush is a no-op")
		require.Equal(t, int64(2), writes.Load())
		require.NoError(t, q.WriteBuffered())
		require.Equal(t, int64(3), writes.Load(), "[14,20)")
		require.Equal(t, []string{fileName(0), fileName(7 * UnitSize), fileName(14 * UnitSize)}, queueFiles(t, fs, root))

		// Put makes visible what was buffered before it, in order.
		putBuffered(t, q, 20, 23, 0)
		put(t, q, unitAt(23, 0))
		require.Equal(t, int64(24), q.MaxOffset())
		require.Equal(t, int64(4), writes.Load(), "[20,21) reached the file start 21")
		checkRange(t, q, 0, 24, 0)

		// Close writes the rest, as a reopen shows.
		require.NoError(t, q.Close())
		require.Equal(t, int64(5), writes.Load())
		q2 := openQueue(t, fs, root, 7)
		require.Equal(t, int64(24), q2.MaxOffset())
		checkRange(t, q2, 0, 24, 0)
		require.NoError(t, q2.Close())
	})
}

// Flush writes when the units in memory reach a multiple of spillUnits
// from the start of the file (whole pages no write touched before), and
// only up to there; readers see every flushed unit, written or not.
func TestFlushWritesAtSpillBoundaries(t *testing.T) {
	forEachFS(t, func(t *testing.T, base vfs.FS, root string) {
		const perFile = 3000 // not a multiple of spillUnits
		fs, writes := countingFS(base)
		q := openQueue(t, fs, root, perFile)
		for end := int64(0); end < 2*perFile+500; {
			n := min(100, 2*perFile+500-end)
			putBuffered(t, q, end, end+n, 0)
			end += n
			require.NoError(t, q.Flush())
			require.Equal(t, end, q.MaxOffset())
			before := writes.Load()
			q.mu.RLock()
			disk := q.mu.disk
			q.mu.RUnlock()
			in := end % perFile
			require.Equal(t, end-in%spillUnits, disk, "written up to the last boundary at %d", end)
			require.NoError(t, q.Flush())
			require.Equal(t, before, writes.Load(), "nothing more to write until the next boundary")
		}
		require.NoError(t, q.checkInvariants())
		checkRange(t, q, 0, 2*perFile+500, 0)
		units, next, err := q.Read(perFile-10, 1000, nil)
		require.NoError(t, err)
		require.Len(t, units, 1000)
		require.Equal(t, int64(perFile+990), next)
		for _, u := range units {
			require.Equal(t, unitAt(u.Offset, 0), u)
		}
		require.NoError(t, q.Close())
		q = openQueue(t, fs, root, perFile)
		checkRange(t, q, 0, 2*perFile+500, 0)
		require.NoError(t, q.Close())
	})
}

func TestPutBufferedChecksAgainstBuffer(t *testing.T) {
	q := openQueue(t, vfs.NewMem(), "/cq", 7)
	putRange(t, q, 0, 3, 0)
	putBuffered(t, q, 3, 10, 0)
	u := unitAt(5, 0)
	require.NoError(t, q.PutBuffered(5, u.PhyOffset, u.Size, u.TagsCode), "identical replay of a buffered unit")
	require.NoError(t, q.PutBuffered(1, unitAt(1, 0).PhyOffset, unitAt(1, 0).Size, unitAt(1, 0).TagsCode), "identical replay of a written unit")
	require.ErrorIs(t, q.PutBuffered(5, u.PhyOffset+1, u.Size, u.TagsCode), ErrOffsetMismatch)
	require.ErrorIs(t, q.PutBuffered(11, 10_000, 10, 0), ErrOffsetMismatch, "a gap after the buffer")
	require.ErrorIs(t, q.PutBuffered(3, 10_000, 10, 0), ErrOffsetMismatch, "offset 3 is taken by a buffered unit")
	last := unitAt(9, 0)
	require.ErrorIs(t, q.PutBuffered(10, last.PhyOffset+1, 5, 0), ErrInvalidUnit, "overlaps the last buffered unit")
	require.ErrorIs(t, q.PutBuffered(10, 100_000, 0, 0), ErrInvalidUnit)
	require.Equal(t, int64(3), q.MaxOffset())
	require.NoError(t, q.Flush())
	require.Equal(t, int64(10), q.MaxOffset())
	checkRange(t, q, 0, 10, 0)
}

func TestPutBufferedFlushesWhenFull(t *testing.T) {
	q := openQueue(t, vfs.NewMem(), "/cq", 1000)
	putBuffered(t, q, 0, maxPending-1, 0)
	require.Zero(t, q.MaxOffset())
	putBuffered(t, q, maxPending-1, maxPending+5, 0)
	require.Equal(t, int64(maxPending), q.MaxOffset(), "written when maxPending units waited")
	require.NoError(t, q.Sync())
	require.Equal(t, int64(maxPending+5), q.MaxOffset(), "Sync writes the buffer")
	checkRange(t, q, 0, maxPending+5, 0)
}

func TestTruncateDropsBufferedUnits(t *testing.T) {
	forEachFS(t, func(t *testing.T, base vfs.FS, root string) {
		fs, writes := countingFS(base)
		q := openQueue(t, fs, root, 7)
		putRange(t, q, 0, 10, 0)
		w := writes.Load()
		putBuffered(t, q, 10, 16, 0)

		require.NoError(t, q.TruncateTo(14))
		require.NoError(t, q.TruncatePhy(unitAt(13, 0).PhyOffset))
		require.NoError(t, q.TruncateTo(100), "beyond the end: a no-op")
		require.Equal(t, w, writes.Load(), "dropping buffered units writes nothing")
		require.Equal(t, int64(10), q.MaxOffset())
		require.NoError(t, q.Flush())
		require.Equal(t, int64(13), q.MaxOffset())
		checkRange(t, q, 0, 13, 0)

		// Truncating into the written units drops the whole buffer.
		putBuffered(t, q, 13, 15, 0)
		require.NoError(t, q.TruncateTo(8))
		require.NoError(t, q.Flush())
		require.Equal(t, int64(8), q.MaxOffset())
		putBuffered(t, q, 8, 12, 1)
		require.NoError(t, q.TruncatePhy(unitAt(5, 0).PhyOffset))
		require.NoError(t, q.Flush())
		require.Equal(t, int64(5), q.MaxOffset())
		checkRange(t, q, 0, 5, 0)
		putRange(t, q, 5, 9, 2)
		checkRange(t, q, 5, 9, 2)

		// ResetTo drops it too; DeleteBefore writes it first.
		putBuffered(t, q, 9, 12, 2)
		n, err := q.DeleteBefore(unitAt(8, 2).PhyOffset)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, int64(12), q.MaxOffset())
		checkRange(t, q, 8, 12, 2)
		putBuffered(t, q, 12, 14, 2)
		require.NoError(t, q.ResetTo(30))
		require.NoError(t, q.Flush())
		require.Equal(t, int64(30), q.MaxOffset())
		require.Equal(t, int64(30), q.MinOffset())
	})
}

// A failed write is sticky: units Flush made visible stay readable (from
// memory), units never flushed are dropped, and every later write, flush
// and sync reports the failure.
func TestBufferedWriteErrorIsSticky(t *testing.T) {
	tog := &vfs.Toggle{}
	fs := vfs.WithErrors(vfs.NewMem(), tog)
	set, err := OpenSet(fs, "/cq", Options{UnitsPerFile: 4})
	require.NoError(t, err)
	q, err := set.Queue("T", 0, true)
	require.NoError(t, err)
	other, err := set.Queue("T", 1, true)
	require.NoError(t, err)
	putRange(t, q, 0, 3, 0)
	require.NoError(t, q.Sync())
	putBuffered(t, q, 3, 6, 0) // spans two files
	require.NoError(t, q.Flush())
	putBuffered(t, q, 6, 7, 0) // never flushed
	putBuffered(t, other, 0, 2, 0)
	require.NoError(t, other.Flush())
	tog.Arm(vfs.OpWrite)
	_, err = set.MarkDirty()
	require.ErrorIs(t, err, vfs.ErrInjected)
	require.ErrorIs(t, errors.Join(q.WriteBuffered(), other.WriteBuffered()), vfs.ErrInjected)
	tog.Disarm()
	require.Equal(t, int64(6), q.MaxOffset(), "flushed units stay visible")
	require.NoError(t, q.checkInvariants())
	checkRange(t, q, 0, 6, 0)
	require.Equal(t, int64(2), other.MaxOffset())
	checkRange(t, other, 0, 2, 0)

	u := unitAt(6, 0)
	require.ErrorIs(t, q.PutBuffered(6, u.PhyOffset, u.Size, u.TagsCode), vfs.ErrInjected, "sticky")
	require.ErrorIs(t, q.Put(6, u.PhyOffset, u.Size, u.TagsCode), vfs.ErrInjected)
	require.ErrorIs(t, q.Flush(), vfs.ErrInjected)
	require.ErrorIs(t, q.Sync(), vfs.ErrInjected)
	require.ErrorIs(t, set.SyncDirty(), vfs.ErrInjected)
	require.ErrorIs(t, other.Flush(), vfs.ErrInjected)
	require.Equal(t, int64(6), q.MaxOffset())
	require.NoError(t, set.Close())
}

// A failure part way through a write that spans files publishes exactly the
// units written before it.
func TestBufferedWriteErrorMidFlush(t *testing.T) {
	var armed atomic.Bool
	mem := vfs.NewMem()
	fs := vfs.WithErrors(mem, vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if armed.Load() && op == vfs.OpWrite && strings.HasSuffix(path, fileName(4*UnitSize)) {
			return fmt.Errorf("second file: %w", vfs.ErrInjected)
		}
		return nil
	}))
	q := openQueue(t, fs, "/cq", 4)
	putBuffered(t, q, 0, 7, 0)
	armed.Store(true)
	require.ErrorIs(t, q.Sync(), vfs.ErrInjected)
	require.Equal(t, int64(4), q.MaxOffset(), "the first file's units were written")
	checkRange(t, q, 0, 4, 0)
	require.ErrorIs(t, q.Sync(), vfs.ErrInjected)
	require.NoError(t, q.Close())
	q = openQueue(t, mem, "/cq", 4)
	require.Equal(t, int64(4), q.MaxOffset())
	require.NoError(t, q.Close())
}

// Units flushed and synced survive a power loss; units only buffered are
// lost with the process, and replaying them is clean.
func TestBufferedCrash(t *testing.T) {
	for seed := uint64(0); seed < 100; seed++ {
		rng := newRand(seed)
		fs := vfs.NewMem()
		q, err := OpenQueue(fs, "/cq", "T", 0, Options{UnitsPerFile: 5})
		require.NoError(t, err)
		total := 1 + rng.Int64N(40)
		synced, flushed := int64(0), int64(0)
		for i := int64(0); i < total; i++ {
			putBuffered(t, q, i, i+1, 0)
			switch rng.IntN(6) {
			case 0:
				require.NoError(t, q.Sync())
				synced, flushed = i+1, i+1
			case 1:
				require.NoError(t, q.Flush())
				flushed = i + 1
			}
		}
		require.Equal(t, flushed, q.MaxOffset())
		crashed := fs.CrashClone(rng, []float64{0, 0.5, 1}[seed%3])
		q2, err := OpenQueue(crashed, "/cq", "T", 0, Options{UnitsPerFile: 5})
		require.NoError(t, err)
		max := q2.MaxOffset()
		require.GreaterOrEqual(t, max, synced, "seed %d", seed)
		require.LessOrEqual(t, max, flushed, "seed %d: only written units can survive", seed)
		checkRange(t, q2, 0, max, 0)
		putBuffered(t, q2, synced, total, 0) // replays what survived
		require.NoError(t, q2.Close())
		q3, err := OpenQueue(crashed, "/cq", "T", 0, Options{UnitsPerFile: 5})
		require.NoError(t, err)
		require.Equal(t, total, q3.MaxOffset(), "Close writes the buffer")
		checkRange(t, q3, 0, total, 0)
		require.NoError(t, q3.Close())
	}
}

// A spill that keeps units in memory never rewrites the bytes it last
// published to readers (through mu.mem, until it replaces mu.mem under
// mu.Lock): a reader that took mu.mem just before may still be reading
// them. Here the units kept (past a spill boundary) outnumber those
// written, so moving them to the front of the same buffer would overwrite
// them.
func TestSpillKeepsPublishedBytes(t *testing.T) {
	q := openQueue(t, vfs.NewMem(), "/cq", 5000)
	putRange(t, q, 0, spillUnits-10, 0)
	require.NoError(t, q.WriteBuffered()) // the files end 10 units short of a boundary
	putBuffered(t, q, spillUnits-10, spillUnits+500, 0)
	q.w.Lock()
	old := q.w.pend // the array Flush publishes, then spills from
	snap := bytes.Clone(old)
	q.w.Unlock()
	require.NoError(t, q.Flush())
	q.mu.RLock()
	disk, max := q.mu.disk, q.mu.max
	q.mu.RUnlock()
	require.Equal(t, int64(spillUnits), disk, "written up to the boundary")
	require.Equal(t, int64(spillUnits+500), max)
	// At the spill's last mu.Unlock, readers saw units [disk, max) at
	// old[10*UnitSize:].
	require.Equal(t, snap[10*UnitSize:510*UnitSize], old[10*UnitSize:510*UnitSize])
	checkRange(t, q, 0, max, 0)
}
