package consumequeue

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
)

func TestPutGetReadAcrossFiles(t *testing.T) {
	forEachFS(t, func(t *testing.T, fs vfs.FS, root string) {
		q := openQueue(t, fs, root, 7)
		require.Equal(t, "TopicTest", q.Topic())
		require.Equal(t, int32(3), q.QueueID())
		require.Zero(t, q.MinOffset())
		require.Zero(t, q.MaxOffset())
		putRange(t, q, 0, 50, 0)
		require.Equal(t, int64(50), q.MaxOffset())
		require.NoError(t, q.Sync())
		check := func(q *Queue) {
			require.Zero(t, q.MinOffset())
			require.Equal(t, int64(50), q.MaxOffset())
			checkRange(t, q, 0, 50, 0)

			units, next, err := q.Read(5, 4, nil)
			require.NoError(t, err)
			require.Equal(t, int64(9), next)
			require.Equal(t, []Unit{unitAt(5, 0), unitAt(6, 0), unitAt(7, 0), unitAt(8, 0)}, units)

			// Tag filter: only TagsCode 1 (offsets 1, 4, 7, ...).
			units, next, err = q.Read(2, 5, func(tags int64) bool { return tags == 1 })
			require.NoError(t, err)
			require.Equal(t, int64(17), next)
			var offs []int64
			for _, u := range units {
				offs = append(offs, u.Offset)
			}
			require.Equal(t, []int64{4, 7, 10, 13, 16}, offs)

			// Reading to the end stops at MaxOffset.
			units, next, err = q.Read(45, 32, nil)
			require.NoError(t, err)
			require.Len(t, units, 5)
			require.Equal(t, int64(50), next)
			units, next, err = q.Read(50, 32, nil)
			require.NoError(t, err)
			require.Empty(t, units)
			require.Equal(t, int64(50), next)
			_, _, err = q.Read(51, 32, nil)
			require.ErrorIs(t, err, ErrOffsetOutOfRange)
			_, _, err = q.Read(0, 0, nil)
			require.ErrorIs(t, err, ErrInvalidArgument)

			for _, off := range []int64{-1, 50, 51, math.MaxInt64} {
				_, err := q.Get(off)
				require.ErrorIs(t, err, ErrOffsetOutOfRange, "offset %d", off)
			}
		}
		check(q)
		require.Len(t, queueFiles(t, fs, root), 8) // ceil(50/7)
		require.Equal(t, []string{"00000000000000000000", "00000000000000000140"}, queueFiles(t, fs, root)[:2])
		require.NoError(t, q.Close())
		require.NoError(t, q.Close())
		_, err := q.Get(0)
		require.ErrorIs(t, err, ErrClosed)
		require.ErrorIs(t, q.Put(50, 5000, 1, 0), ErrClosed)

		q = openQueue(t, fs, root, 7)
		check(q)
		putRange(t, q, 50, 60, 0)
		checkRange(t, q, 0, 60, 0)
		require.NoError(t, q.Close())
	})
}

func TestReadScanIsBounded(t *testing.T) {
	q := openQueue(t, vfs.NewMem(), "/cq", 100)
	putRange(t, q, 0, 1000, 0)
	never := func(int64) bool { return false }
	units, next, err := q.Read(10, 2, never)
	require.NoError(t, err)
	require.Empty(t, units)
	require.Equal(t, int64(10+2*scanFactor), next)
	units, next, err = q.Read(990, 2, never)
	require.NoError(t, err)
	require.Empty(t, units)
	require.Equal(t, int64(1000), next)
	units, next, err = q.Read(0, math.MaxInt, nil)
	require.NoError(t, err)
	require.Len(t, units, 1000)
	require.Equal(t, int64(1000), next)
}

func TestPutValidation(t *testing.T) {
	q := openQueue(t, vfs.NewMem(), "/cq", 7)
	putRange(t, q, 0, 10, 0)

	// Gap and overlap.
	require.ErrorIs(t, q.Put(11, 1100, 10, 0), ErrOffsetMismatch)
	u := unitAt(4, 0)
	require.ErrorIs(t, q.Put(4, u.PhyOffset, u.Size, u.TagsCode+1), ErrOffsetMismatch)
	require.ErrorIs(t, q.Put(-1, 0, 10, 0), ErrOffsetMismatch)
	// Replay of identical units is a no-op.
	for i := int64(0); i < 10; i++ {
		put(t, q, unitAt(i, 0))
	}
	require.Equal(t, int64(10), q.MaxOffset())

	// Malformed units.
	require.ErrorIs(t, q.Put(10, 1000, 0, 0), ErrInvalidUnit)
	require.ErrorIs(t, q.Put(10, 1000, -5, 0), ErrInvalidUnit)
	require.ErrorIs(t, q.Put(10, -1, 5, 0), ErrInvalidUnit)
	// Overlapping the previous unit in the commit log.
	prev := unitAt(9, 0)
	require.ErrorIs(t, q.Put(10, prev.PhyOffset+int64(prev.Size)-1, 5, 0), ErrInvalidUnit)
	require.NoError(t, q.Put(10, prev.PhyOffset+int64(prev.Size), 5, 0))
	// None of the refusals is sticky.
	require.NoError(t, q.Put(11, 5000, 5, 0))
	require.NoError(t, q.Sync())
}

func TestOpenValidation(t *testing.T) {
	fs := vfs.NewMem()
	for _, topic := range []string{"", ".", "..", "a/b", "a\\b", "a\x00"} {
		_, err := OpenQueue(fs, "/cq", topic, 0, Options{})
		require.ErrorIs(t, err, ErrInvalidArgument, "topic %q", topic)
	}
	_, err := OpenQueue(fs, "/cq", "t", -1, Options{})
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = OpenQueue(fs, "/cq", "t", 0, Options{UnitsPerFile: -1})
	require.ErrorIs(t, err, ErrInvalidArgument)
	q, err := OpenQueue(fs, "/cq", "t", 0, Options{})
	require.NoError(t, err)
	require.NoError(t, q.Put(0, 0, 10, 0))
	require.NoError(t, q.Close())
	data, err := vfs.ReadFile(fs, "/cq/t/0/00000000000000000000")
	require.NoError(t, err)
	require.Len(t, data, firstFileUnits*UnitSize, "a new file has room for 204 units, not 300,000")
}

func TestTruncateTo(t *testing.T) {
	forEachFS(t, func(t *testing.T, fs vfs.FS, root string) {
		q := openQueue(t, fs, root, 7)
		putRange(t, q, 0, 30, 0)
		require.NoError(t, q.Sync())

		require.NoError(t, q.TruncateTo(30)) // no-op
		require.NoError(t, q.TruncateTo(99)) // no-op
		require.ErrorIs(t, q.TruncateTo(-1), ErrOffsetOutOfRange)

		require.NoError(t, q.TruncateTo(10))
		require.Equal(t, int64(10), q.MaxOffset())
		require.Equal(t, []string{"00000000000000000000", "00000000000000000140"}, queueFiles(t, fs, root))
		_, err := q.Get(10)
		require.ErrorIs(t, err, ErrOffsetOutOfRange)
		putRange(t, q, 10, 20, 1)
		require.NoError(t, q.Close())

		q = openQueue(t, fs, root, 7)
		require.Equal(t, int64(20), q.MaxOffset())
		checkRange(t, q, 0, 10, 0)
		checkRange(t, q, 10, 20, 1)

		// At a file boundary the emptied file is removed.
		require.NoError(t, q.TruncateTo(14))
		require.Equal(t, []string{"00000000000000000000", "00000000000000000140"}, queueFiles(t, fs, root))
		require.NoError(t, q.Close())
		q = openQueue(t, fs, root, 7)
		require.Equal(t, int64(14), q.MaxOffset())
		putRange(t, q, 14, 16, 2)

		// To zero: the first file stays, empty.
		require.NoError(t, q.TruncateTo(0))
		require.Equal(t, []string{"00000000000000000000"}, queueFiles(t, fs, root))
		require.NoError(t, q.Close())
		q = openQueue(t, fs, root, 7)
		require.Zero(t, q.MaxOffset())
		putRange(t, q, 0, 3, 3)
		require.NoError(t, q.Close())
		q = openQueue(t, fs, root, 7)
		require.Equal(t, int64(3), q.MaxOffset())
		checkRange(t, q, 0, 3, 3)
		require.NoError(t, q.Close())
	})
}

func TestTruncatePhy(t *testing.T) {
	q := openQueue(t, vfs.NewMem(), "/cq", 7)
	putRange(t, q, 0, 30, 0)
	require.NoError(t, q.TruncatePhy(3000)) // beyond the end: no-op
	require.Equal(t, int64(30), q.MaxOffset())
	require.NoError(t, q.TruncatePhy(1250)) // units 13+ have phy >= 1300
	require.Equal(t, int64(13), q.MaxOffset())
	require.NoError(t, q.TruncatePhy(1200)) // unit 12 has phy 1200
	require.Equal(t, int64(12), q.MaxOffset())
	require.NoError(t, q.TruncatePhy(0))
	require.Zero(t, q.MaxOffset())
}

func TestStaleUnitsNeverReappear(t *testing.T) {
	for seed := uint64(0); seed < 50; seed++ {
		for _, keep := range []float64{0, 0.5, 1} {
			fs := vfs.NewMem()
			q := openQueue(t, fs, "/cq", 7)
			putRange(t, q, 0, 30, 0)
			require.NoError(t, q.Sync())
			require.NoError(t, q.TruncateTo(10))
			putRange(t, q, 10, 13, 1) // not synced
			crashed := fs.CrashClone(newRand(seed), keep)
			q2 := openQueue(t, crashed, "/cq", 7)
			max := q2.MaxOffset()
			require.GreaterOrEqual(t, max, int64(10), "seed %d keep %v", seed, keep)
			require.LessOrEqual(t, max, int64(13), "seed %d keep %v", seed, keep)
			checkRange(t, q2, 0, 10, 0)
			checkRange(t, q2, 10, max, 1)
			require.NoError(t, q2.Close())
			require.NoError(t, q.Close())
		}
	}
}

func TestDeleteBefore(t *testing.T) {
	forEachFS(t, func(t *testing.T, fs vfs.FS, root string) {
		q := openQueue(t, fs, root, 7)
		n, err := q.DeleteBefore(100) // empty queue
		require.NoError(t, err)
		require.Zero(t, n)
		putRange(t, q, 0, 30, 0)

		n, err = q.DeleteBefore(1600) // files [0,7) and [7,14) end below phy 1600
		require.NoError(t, err)
		require.Equal(t, 2, n)
		require.Equal(t, int64(16), q.MinOffset())
		require.Equal(t, int64(30), q.MaxOffset())
		require.Equal(t, "00000000000000000280", queueFiles(t, fs, root)[0])
		for _, off := range []int64{0, 13, 14, 15} {
			_, err := q.Get(off)
			require.ErrorIs(t, err, ErrOffsetOutOfRange, "offset %d", off)
		}
		_, _, err = q.Read(15, 10, nil)
		require.ErrorIs(t, err, ErrOffsetOutOfRange)
		checkRange(t, q, 16, 30, 0)
		// A put below MinOffset cannot be verified.
		u := unitAt(15, 0)
		require.ErrorIs(t, q.Put(15, u.PhyOffset, u.Size, u.TagsCode), ErrOffsetMismatch)
		// TruncateTo below MinOffset is refused.
		require.ErrorIs(t, q.TruncateTo(15), ErrOffsetOutOfRange)

		// MinOffset never goes back.
		n, err = q.DeleteBefore(0)
		require.NoError(t, err)
		require.Zero(t, n)
		require.Equal(t, int64(16), q.MinOffset())

		// Everything is gone from the commit log: the file holding
		// MaxOffset-1 stays, and the queue is empty.
		n, err = q.DeleteBefore(1 << 40)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		require.Equal(t, []string{"00000000000000000560"}, queueFiles(t, fs, root))
		require.Equal(t, int64(30), q.MinOffset())
		require.Equal(t, int64(30), q.MaxOffset())
		units, next, err := q.Read(30, 10, nil)
		require.NoError(t, err)
		require.Empty(t, units)
		require.Equal(t, int64(30), next)
		putRange(t, q, 30, 40, 0)
		checkRange(t, q, 30, 40, 0)
		require.NoError(t, q.Close())

		// MinOffset is not persisted: after reopening it is the first
		// file's first unit until DeleteBefore corrects it.
		q = openQueue(t, fs, root, 7)
		require.Equal(t, int64(28), q.MinOffset())
		require.Equal(t, int64(40), q.MaxOffset())
		n, err = q.DeleteBefore(3000)
		require.NoError(t, err)
		require.Zero(t, n)
		require.Equal(t, int64(30), q.MinOffset())
		require.NoError(t, q.Close())
	})
}

func TestResetTo(t *testing.T) {
	forEachFS(t, func(t *testing.T, fs vfs.FS, root string) {
		q := openQueue(t, fs, root, 7)
		putRange(t, q, 0, 20, 0)
		require.ErrorIs(t, q.ResetTo(-1), ErrInvalidArgument)
		require.NoError(t, q.ResetTo(10))
		require.Equal(t, int64(10), q.MinOffset())
		require.Equal(t, int64(10), q.MaxOffset())
		require.Equal(t, []string{"00000000000000000140"}, queueFiles(t, fs, root))
		_, err := q.Get(9)
		require.ErrorIs(t, err, ErrOffsetOutOfRange)
		require.NoError(t, q.Close())

		q = openQueue(t, fs, root, 7)
		require.Equal(t, int64(10), q.MinOffset())
		require.Equal(t, int64(10), q.MaxOffset())
		putRange(t, q, 10, 25, 1)
		require.NoError(t, q.Close())
		q = openQueue(t, fs, root, 7)
		require.Equal(t, int64(10), q.MinOffset())
		require.Equal(t, int64(25), q.MaxOffset())
		checkRange(t, q, 10, 25, 1)

		require.NoError(t, q.ResetTo(14)) // a file boundary: an empty file
		require.NoError(t, q.Close())
		q = openQueue(t, fs, root, 7)
		require.Equal(t, int64(14), q.MinOffset())
		require.Equal(t, int64(14), q.MaxOffset())
		putRange(t, q, 14, 15, 2)
		checkRange(t, q, 14, 15, 2)

		require.NoError(t, q.ResetTo(0))
		require.Empty(t, queueFiles(t, fs, root))
		putRange(t, q, 0, 2, 3)
		require.NoError(t, q.Close())
		q = openQueue(t, fs, root, 7)
		checkRange(t, q, 0, 2, 3)
		require.NoError(t, q.Close())
	})
}

func TestSearchOffset(t *testing.T) {
	q := openQueue(t, vfs.NewMem(), "/cq", 7)
	// Unit i was stored at time 1000 + 10*(i/2): pairs share a timestamp.
	storeTime := func(phy int64, size int32) (int64, error) {
		require.Equal(t, unitAt(phy/100, 0).Size, size)
		return 1000 + 10*(phy/100/2), nil
	}
	search := func(ts int64) int64 {
		off, err := q.SearchOffset(ts, storeTime)
		require.NoError(t, err)
		return off
	}
	require.Zero(t, search(5))
	putRange(t, q, 0, 40, 0)
	require.Zero(t, search(0))
	require.Zero(t, search(1000))
	require.Equal(t, int64(2), search(1001))
	require.Equal(t, int64(2), search(1010))
	require.Equal(t, int64(38), search(1190))
	require.Equal(t, int64(40), search(1191))
	require.Equal(t, int64(40), search(math.MaxInt64))

	_, err := q.DeleteBefore(1000) // MinOffset 10
	require.NoError(t, err)
	require.Equal(t, int64(10), search(0))
	require.Equal(t, int64(12), search(1060))

	boom := errors.New("boom")
	_, err = q.SearchOffset(1050, func(int64, int32) (int64, error) { return 0, boom })
	require.ErrorIs(t, err, boom)
}

// A first file whose only unit after the blanks is its last unit reopens:
// recovery checks that unit once (it used to compare it with itself and
// report an overlap).
func TestResetToLastUnitOfFile(t *testing.T) {
	fs := vfs.NewMem()
	q := openQueue(t, fs, "/cq", 7)
	require.NoError(t, q.ResetTo(6)) // 6 blanks
	putRange(t, q, 6, 9, 0)          // into the next file
	require.NoError(t, q.Close())
	q = openQueue(t, fs, "/cq", 7)
	require.Equal(t, int64(6), q.MinOffset())
	checkRange(t, q, 6, 9, 0)
	require.NoError(t, q.Close())
}
