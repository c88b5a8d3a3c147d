package consumequeue

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
)

func benchFS(b *testing.B, f func(b *testing.B, fs vfs.FS, root string)) {
	b.Run("os", func(b *testing.B) { f(b, vfs.Default(), b.TempDir()) })
	b.Run("mem", func(b *testing.B) { f(b, vfs.NewMem(), "/cq") })
}

// BenchmarkPut appends units without syncing (the page-cache path).
func BenchmarkPut(b *testing.B) {
	benchFS(b, func(b *testing.B, fs vfs.FS, root string) {
		q, err := OpenQueue(fs, root, "T", 0, Options{})
		require.NoError(b, err)
		b.SetBytes(UnitSize)
		b.ReportAllocs()
		i := int64(0)
		for b.Loop() {
			if err := q.Put(i, i*100, 100, i%7); err != nil {
				b.Fatal(err)
			}
			i++
		}
		b.StopTimer()
		require.NoError(b, q.Close())
	})
}

// BenchmarkPutBuffered appends units in batches of 8 per Flush, as the
// store's Apply does for a queue that gets 8 messages of a 64-message entry.
func BenchmarkPutBuffered(b *testing.B) {
	benchFS(b, func(b *testing.B, fs vfs.FS, root string) {
		q, err := OpenQueue(fs, root, "T", 0, Options{})
		require.NoError(b, err)
		b.SetBytes(UnitSize)
		b.ReportAllocs()
		i := int64(0)
		for b.Loop() {
			if err := q.PutBuffered(i, i*100, 100, i%7); err != nil {
				b.Fatal(err)
			}
			i++
			if i%8 == 0 {
				if err := q.Flush(); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.StopTimer()
		require.NoError(b, q.Close())
	})
}

// BenchmarkRead reads batches of 32 units from mapped, cached files.
func BenchmarkRead(b *testing.B) {
	const n = 100_000
	benchFS(b, func(b *testing.B, fs vfs.FS, root string) {
		q, err := OpenQueue(fs, root, "T", 0, Options{})
		require.NoError(b, err)
		for i := int64(0); i < n; i++ {
			require.NoError(b, q.Put(i, i*100, 100, i%7))
		}
		b.SetBytes(UnitSize * 32)
		b.ReportAllocs()
		off := int64(0)
		for b.Loop() {
			units, next, err := q.Read(off, 32, nil)
			if err != nil || len(units) != 32 {
				b.Fatal(err, len(units))
			}
			off = next
			if off+32 > n {
				off = 0
			}
		}
		b.StopTimer()
		require.NoError(b, q.Close())
	})
}

// benchSet opens a Set of n queues of 10 units each, synced, that keeps at
// most maxOpen files open.
func benchSet(b *testing.B, fs vfs.FS, root string, n, maxOpen int) (*Set, []*Queue) {
	set, err := OpenSet(fs, root, Options{MaxOpenFiles: maxOpen})
	require.NoError(b, err)
	qs := make([]*Queue, n)
	for i := range qs {
		topic, id := queueName(i)
		qs[i], err = set.Queue(topic, id, true)
		require.NoError(b, err)
		for j := int64(0); j < 10; j++ {
			require.NoError(b, qs[i].PutBuffered(j, j*100, 100, 0))
		}
	}
	require.NoError(b, set.SyncDirty())
	return set, qs
}

// BenchmarkGetEvicting reads one unit from each of 256 queues in turn
// through a cache of 64 files: every Get reopens and maps a file and closes
// another (clean) one.
func BenchmarkGetEvicting(b *testing.B) {
	benchFS(b, func(b *testing.B, fs vfs.FS, root string) {
		set, qs := benchSet(b, fs, root, 256, 64)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := qs[i%len(qs)].Get(5); err != nil {
				b.Fatal(err)
			}
			i++
		}
		b.StopTimer()
		require.LessOrEqual(b, set.OpenFiles(), 64)
		require.NoError(b, set.Close())
	})
}

// BenchmarkPutEvicting appends one unit to each of 256 queues in turn
// through a cache of 64 files, syncing nothing: every Put reopens a file and
// closes another, which holds an unsynced unit and so is synced first (the
// worst case; an owner that syncs regularly leaves clean files to close).
func BenchmarkPutEvicting(b *testing.B) {
	benchFS(b, func(b *testing.B, fs vfs.FS, root string) {
		set, qs := benchSet(b, fs, root, 256, 64)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			q := qs[i%len(qs)]
			off := 10 + int64(i/len(qs))
			if err := q.Put(off, off*100, 100, 0); err != nil {
				b.Fatal(err)
			}
			i++
		}
		b.StopTimer()
		require.LessOrEqual(b, set.OpenFiles(), 64)
		require.NoError(b, set.Close())
	})
}
