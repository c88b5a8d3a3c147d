package index

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
)

// countingFS counts the WriteAt calls that reach the files of fs.
func countingFS(fs vfs.FS) (vfs.FS, *atomic.Int64) { return vfs.Counting(fs, vfs.OpWrite) }

// keyForSlot returns a key of topic T whose slot is s.
func keyForSlot(t *testing.T, slots, s int32) string {
	t.Helper()
	for i := 0; i < 1_000_000; i++ {
		k := fmt.Sprintf("T#slot-%d-%d", s, i)
		if keyHash(k)%slots == s {
			return k
		}
	}
	t.Fatalf("no key for slot %d", s)
	return ""
}

// Query finds entries still in the write buffer, and Flush writes the
// entries with one WriteAt and nearby slots together.
func TestQueryReadsWriteBuffer(t *testing.T) {
	forEachFS(t, func(t *testing.T, base vfs.FS, dir string) {
		const slots = 10_000
		fs, writes := countingFS(base)
		x := openT(t, fs, dir, tinyOpts(t, slots, 100))
		// Slots 10 and 900 are 890 slots apart: one run. Slot 5000 is far:
		// a run of its own.
		k10, k900, k5000 := keyForSlot(t, slots, 10), keyForSlot(t, slots, 900), keyForSlot(t, slots, 5000)
		putAll(t, x, []op{{k10, 100, baseTS}, {k900, 200, baseTS + 1000}, {k5000, 300, baseTS + 2000}, {k10, 400, baseTS + 3000}})
		require.Zero(t, writes.Load(), "Put does not write")
		check := func() {
			t.Helper()
			got, err := x.Query(k10, 10, 0, 1<<62)
			require.NoError(t, err)
			require.Equal(t, []int64{400, 100}, got, "a chain running through the buffer")
			got, err = x.Query(k5000, 10, 0, 1<<62)
			require.NoError(t, err)
			require.Equal(t, []int64{300}, got)
			got, err = x.Query("T#absent", 10, 0, 1<<62)
			require.NoError(t, err)
			require.Empty(t, got)
		}
		check()
		require.NoError(t, x.Flush())
		require.Equal(t, int64(3), writes.Load(), "entries, slots 10..900, slot 5000")
		check()
		require.NoError(t, x.Flush())
		require.Equal(t, int64(3), writes.Load(), "nothing left to write")

		// Later puts chain onto flushed entries.
		putAll(t, x, []op{{k10, 500, baseTS + 4000}})
		got, err := x.Query(k10, 10, 0, 1<<62)
		require.NoError(t, err)
		require.Equal(t, []int64{500, 400, 100}, got)
		require.NoError(t, x.Close())

		y := openT(t, fs, dir, tinyOpts(t, slots, 100))
		got, err = y.Query(k10, 10, 0, 1<<62)
		require.NoError(t, err)
		require.Equal(t, []int64{500, 400, 100}, got)
		require.NoError(t, y.Close())
	})
}

// Flushing at any moments gives the bytes of flushing after every Put.
func TestFlushTimingDoesNotChangeBytes(t *testing.T) {
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 7))
		opts := Options{SlotCount: 1 + rng.IntN(5000), MaxEntries: 2 + rng.IntN(300)}
		if seed%4 == 0 { // runs longer than maxSlotRun are split
			pageSlots := slotPageSize / slotSize
			opts.SlotCount, opts.MaxEntries = 2*maxSlotRun*pageSlots+rng.IntN(3*maxSlotRun*pageSlots), 1000
		}
		n := 1 + rng.IntN(800)
		ops := make([]op, n)
		phy, ts := int64(0), baseTS
		for i := range ops {
			phy += rng.Int64N(300)
			ts += rng.Int64N(2000) - 300
			ops[i] = op{key: fmt.Sprintf("T#k%d", rng.IntN(1+rng.IntN(2000))), phy: phy, ts: max(ts, 0)}
		}
		ref := vfs.NewMem()
		x := openT(t, ref, "/i", opts)
		for _, o := range ops {
			require.NoError(t, x.Put(o.key, o.phy, o.ts))
			require.NoError(t, x.Flush())
		}
		require.NoError(t, x.Close())

		fs := vfs.NewMem()
		y := openT(t, fs, "/i", opts)
		for _, o := range ops {
			require.NoError(t, y.Put(o.key, o.phy, o.ts))
			switch rng.IntN(20) {
			case 0:
				require.NoError(t, y.Flush())
			case 1:
				_, err := y.Sync()
				require.NoError(t, err)
			}
		}
		require.NoError(t, y.Close())
		require.Equal(t, snapshot(t, ref, "/i"), snapshot(t, fs, "/i"), "seed %d", seed)
	}
}

func TestPutFlushesFullBuffer(t *testing.T) {
	fs, writes := countingFS(vfs.NewMem())
	x := openT(t, fs, "/i", Options{SlotCount: 1 << 10, MaxEntries: maxPendingEntries + 10})
	for i := range maxPendingEntries - 1 {
		require.NoError(t, x.Put(fmt.Sprintf("T#%d", i), int64(i), baseTS))
	}
	require.Zero(t, writes.Load())
	require.NoError(t, x.Put("T#last", maxPendingEntries, baseTS))
	require.NotZero(t, writes.Load(), "a full buffer is written")
	require.NoError(t, x.Close())
}

// A failed flush is sticky, and queries keep seeing every entry put.
func TestFlushErrorIsSticky(t *testing.T) {
	tog := &vfs.Toggle{}
	fs := vfs.WithErrors(vfs.NewMem(), tog)
	x := openT(t, fs, "/i", tinyOpts(t, 4, 100))
	ops := seqOps(10, 3)
	putAll(t, x, ops)
	tog.Arm(vfs.OpWrite)
	require.ErrorIs(t, x.Flush(), vfs.ErrInjected)
	tog.Disarm()
	got, err := x.Query(ops[9].key, 10, 0, 1<<62)
	require.NoError(t, err)
	require.Equal(t, []int64{ops[9].phy, ops[6].phy, ops[3].phy, ops[0].phy}, got)
	require.ErrorIs(t, x.Put("T#k", 5000, baseTS+99_000), vfs.ErrInjected)
	require.ErrorIs(t, x.Flush(), vfs.ErrInjected)
	_, err = x.Sync()
	require.ErrorIs(t, err, vfs.ErrInjected)
	require.NoError(t, x.Close())
}
