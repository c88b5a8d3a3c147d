package index

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
)

// crashOps returns n puts with few keys (long chains, shared slots), offsets
// that sometimes repeat (several keys of one message) and timestamps that
// sometimes go backwards.
func crashOps(rng *rand.Rand, n int) []op {
	ops := make([]op, n)
	phy, ts := int64(0), baseTS
	for i := range ops {
		if rng.IntN(4) != 0 {
			phy += 1 + rng.Int64N(500)
		}
		ts += rng.Int64N(3000) - 500
		ops[i] = op{key: fmt.Sprintf("T#k%d", rng.IntN(9)), phy: phy, ts: ts}
	}
	return ops
}

// TestCrashRecover puts, syncs (keeping checkpoints), puts more, and loses
// power. Recover from one of the checkpoints plus putting the rest again
// must give exactly the files of a run without a crash.
func TestCrashRecover(t *testing.T) {
	const seeds = 150
	opts := Options{SlotCount: 4, MaxEntries: 8} // 7 entries per file
	for seed := range uint64(seeds) {
		for _, keep := range []float64{0, 0.5, 1} {
			t.Run(fmt.Sprintf("seed=%d/keep=%v", seed, keep), func(t *testing.T) {
				crashRecover(t, seed, keep, opts)
			})
		}
	}
}

// referenceFiles returns the files of an index that took ops and closed
// cleanly: what a recovered index must hold byte for byte.
func referenceFiles(t *testing.T, ops []op, opts Options) map[string][]byte {
	t.Helper()
	ref := vfs.NewMem()
	x := openT(t, ref, "/i", opts)
	putAll(t, x, ops)
	require.NoError(t, x.Close())
	return snapshot(t, ref, "/i")
}

func crashRecover(t *testing.T, seed uint64, keep float64, opts Options) {
	rng := rand.New(rand.NewPCG(seed, seed))
	ops := crashOps(rng, 20+rng.IntN(40))

	want := referenceFiles(t, ops, opts)

	fs := vfs.NewMem()
	x := openT(t, fs, "/i", opts)
	type synced struct {
		puts int
		cp   Checkpoint
	}
	cps := []synced{{0, Checkpoint{}}}
	crashAt := rng.IntN(len(ops) + 1)
	for i, o := range ops[:crashAt] {
		require.NoError(t, x.Put(o.key, o.phy, o.ts))
		if rng.IntN(8) == 0 {
			cp, err := x.Sync()
			require.NoError(t, err)
			cps = append(cps, synced{i + 1, cp})
		}
		if rng.IntN(30) == 0 {
			_, err := x.DeleteBefore(0) // a no-op: removes nothing
			require.NoError(t, err)
		}
	}
	// The caller may have persisted any checkpoint, usually the last.
	use := cps[len(cps)-1]
	if rng.IntN(3) == 0 {
		use = cps[rng.IntN(len(cps))]
	}
	crashed := fs.CrashClone(rand.New(rand.NewPCG(seed, seed)), keep)

	y, err := Open(crashed, "/i", opts)
	require.NoError(t, err, "Open after crash")
	require.NoError(t, y.Recover(use.cp), "Recover(%+v) after %d puts", use.cp, use.puts)
	putAll(t, y, ops[use.puts:])
	require.NoError(t, y.Close())
	require.Equal(t, want, snapshot(t, crashed, "/i"))

	// A clean restart with the final checkpoint is a no-op.
	z := openT(t, crashed, "/i", opts)
	cp, err := z.Sync()
	require.NoError(t, err)
	require.NoError(t, z.Recover(cp))
	require.NoError(t, z.Close())
	require.Equal(t, want, snapshot(t, crashed, "/i"))
}

// TestCrashDebrisNeedsRecover shows Open tolerating a crash's debris and
// refusing to serve until Recover.
func TestCrashDebrisNeedsRecover(t *testing.T) {
	fs := vfs.NewMem()
	opts := tinyOpts(t, 4, 4)
	x := openT(t, fs, "/i", opts)
	ops := seqOps(12, 3)
	putAll(t, x, ops[:3])
	cp, err := x.Sync()
	require.NoError(t, err)
	putAll(t, x, ops[3:]) // three more files, none synced
	crashed := fs.CrashClone(rand.New(rand.NewPCG(1, 1)), 1)

	y, err := Open(crashed, "/i", opts)
	require.NoError(t, err)
	require.Len(t, y.Files(), 4)
	_, err = y.Query(ops[0].key, 10, 0, 1<<62)
	require.ErrorIs(t, err, ErrNeedsRecover)
	require.ErrorIs(t, err, ErrCorrupt)
	var ce *CorruptError
	require.ErrorAs(t, err, &ce)
	require.Greater(t, ce.File, "/i/"+cp.File, "debris is newer than the checkpoint")
	require.ErrorIs(t, y.Put("k", 1e6, baseTS+1e6), ErrNeedsRecover)
	_, err = y.Sync()
	require.ErrorIs(t, err, ErrNeedsRecover)

	require.NoError(t, y.Recover(cp))
	require.Len(t, y.Files(), 1)
	got, err := y.Query(ops[0].key, 10, 0, 1<<62)
	require.NoError(t, err)
	require.Equal(t, []int64{ops[0].phy}, got)
	require.NoError(t, y.Close())
}

// TestSlotDebrisNeedsRecover: entries put after the checkpoint into the same
// file, and written by Flush, survive the crash, the header does not; Open
// notices the slots.
func TestSlotDebrisNeedsRecover(t *testing.T) {
	fs := vfs.NewMem()
	opts := tinyOpts(t, 4, 64)
	x := openT(t, fs, "/i", opts)
	ops := seqOps(20, 3)
	putAll(t, x, ops[:10])
	cp, err := x.Sync()
	require.NoError(t, err)
	putAll(t, x, ops[10:])
	require.NoError(t, x.Flush())
	crashed := fs.CrashClone(rand.New(rand.NewPCG(1, 1)), 1)

	y, err := Open(crashed, "/i", opts)
	require.NoError(t, err)
	require.Equal(t, int32(11), y.Files()[0].IndexCount, "header as of the checkpoint")
	_, err = y.Query(ops[0].key, 10, 0, 1<<62)
	require.ErrorIs(t, err, ErrNeedsRecover)
	var ce *CorruptError
	require.ErrorAs(t, err, &ce)
	require.Less(t, ce.Offset, int64(40+4*4), "a slot")
	require.ErrorIs(t, y.Put("k", 1e6, baseTS+1e6), ErrNeedsRecover)

	require.NoError(t, y.Recover(cp))
	putAll(t, y, ops[10:])
	require.NoError(t, y.Close())
	ref := vfs.NewMem()
	z := openT(t, ref, "/i", opts)
	putAll(t, z, ops)
	require.NoError(t, z.Close())
	require.Equal(t, snapshot(t, ref, "/i"), snapshot(t, crashed, "/i"))
}

func TestRecoverZeroCheckpoint(t *testing.T) {
	forEachFS(t, func(t *testing.T, fs vfs.FS, dir string) {
		x := openT(t, fs, dir, tinyOpts(t, 4, 4))
		putAll(t, x, seqOps(10, 3))
		require.NoError(t, x.Recover(Checkpoint{}))
		require.Empty(t, x.Files())
		names, err := fs.List(dir)
		require.NoError(t, err)
		require.Empty(t, names)
		putAll(t, x, seqOps(2, 3))
		require.NoError(t, x.Close())
	})
}

func TestRecoverRejectsBadCheckpoints(t *testing.T) {
	fs := vfs.NewMem()
	opts := tinyOpts(t, 4, 4) // 3 entries per file
	x := openT(t, fs, "/i", opts)
	ops := seqOps(5, 3)
	putAll(t, x, ops)
	cp, err := x.Sync()
	require.NoError(t, err)
	require.Equal(t, Checkpoint{File: fileName(ops[3].ts), Count: 3}, cp)
	require.NoError(t, x.Close())

	for _, bad := range []Checkpoint{
		{File: "20000101000000000", Count: 2}, // missing file
		{File: cp.File, Count: 0},             // below 1
		{File: cp.File, Count: 5},             // above MaxEntries
		{File: cp.File, Count: cp.Count + 1},  // beyond the synced header
	} {
		y := openT(t, fs, "/i", opts)
		require.ErrorIs(t, y.Recover(bad), ErrCorrupt, "%+v", bad)
		require.NoError(t, y.Close())
		require.Len(t, snapshot(t, fs, "/i"), 2, "a refused Recover changes nothing")
	}

	// An older checkpoint is fine: the newer file goes, the older is cut.
	y := openT(t, fs, "/i", opts)
	require.NoError(t, y.Recover(Checkpoint{File: fileName(ops[0].ts), Count: 3}))
	require.Len(t, y.Files(), 1)
	require.Equal(t, int32(3), y.Files()[0].IndexCount)
	putAll(t, y, ops[2:])
	require.NoError(t, y.Close())

	ref := vfs.NewMem()
	z := openT(t, ref, "/i", opts)
	putAll(t, z, ops)
	require.NoError(t, z.Close())
	require.Equal(t, snapshot(t, ref, "/i"), snapshot(t, fs, "/i"))
}

// Recover on an index that still buffers puts made after the checkpoint
// (their heads are in the slot table in memory, not in the file) cuts them
// and puts back the slots they changed: putting the same entries again
// gives the bytes of a run that never saw them, and so does a reopen.
func TestRecoverWithBufferedPuts(t *testing.T) {
	for seed := range uint64(30) {
		rng := rand.New(rand.NewPCG(seed, 3))
		opts := Options{SlotCount: 1 + rng.IntN(3000), MaxEntries: 200 + rng.IntN(300)}
		ops := crashOps(rng, 40+rng.IntN(100))
		want := referenceFiles(t, ops, opts)

		fs := vfs.NewMem()
		y := openT(t, fs, "/i", opts)
		at := rng.IntN(len(ops))
		putAll(t, y, ops[:at])
		cp, err := y.Sync()
		require.NoError(t, err)
		// Other entries than the ones that follow, buffered (a few
		// flushed), then cut.
		for i, o := range crashOps(rng, 1+rng.IntN(60)) {
			require.NoError(t, y.Put(o.key+"-other", max(o.phy, ops[max(at-1, 0)].phy), o.ts))
			if i == 5 {
				require.NoError(t, y.Flush())
			}
		}
		require.NoError(t, y.Recover(cp), "seed %d", seed)
		putAll(t, y, ops[at:])
		require.NoError(t, y.Close())
		require.Equal(t, want, snapshot(t, fs, "/i"), "seed %d", seed)
	}
}
