package index

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
)

const (
	cSlots   = 4
	cEntries = 8 // 7 entries per file
)

// buildCorruptible writes a closed two-file index (one full file, one with
// three entries) and returns its checkpoint, the two file paths and the ops.
func buildCorruptible(t testing.TB) (*vfs.MemFS, Checkpoint, [2]string, []op) {
	fs := vfs.NewMem()
	x := openT(t, fs, "/i", Options{SlotCount: cSlots, MaxEntries: cEntries})
	ops := seqOps(10, 3)
	putAll(t, x, ops)
	cp, err := x.Sync()
	require.NoError(t, err)
	require.NoError(t, x.Close())
	paths := [2]string{"/i/" + fileName(ops[0].ts), "/i/" + fileName(ops[7].ts)}
	return fs, cp, paths, ops
}

func mutate(t testing.TB, fs vfs.FS, path string, fn func(b []byte) []byte) {
	t.Helper()
	b, err := vfs.ReadFile(fs, path)
	require.NoError(t, err)
	b = fn(b)
	f, err := fs.Create(path)
	require.NoError(t, err)
	_, err = f.WriteAt(b, 0)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
}

func put32(off int, v int32) func([]byte) []byte {
	return func(b []byte) []byte { binary.BigEndian.PutUint32(b[off:], uint32(v)); return b }
}

func put64(off int, v int64) func([]byte) []byte {
	return func(b []byte) []byte { binary.BigEndian.PutUint64(b[off:], uint64(v)); return b }
}

func TestCorruptHeader(t *testing.T) {
	fileSize := 40 + 4*cSlots + 20*cEntries
	for _, c := range []struct {
		name    string
		file    int
		fn      func([]byte) []byte
		wantOff int64
	}{
		{"indexCount zero", 0, put32(offIndexCount, 0), offIndexCount},
		{"indexCount negative", 1, put32(offIndexCount, -3), offIndexCount},
		{"indexCount above max", 1, put32(offIndexCount, cEntries+1), offIndexCount},
		{"empty file with fields", 1, put32(offIndexCount, 1), offBeginTimestamp},
		{"hashSlotCount zero", 0, put32(offHashSlotCount, 0), offHashSlotCount},
		{"hashSlotCount above slots", 0, put32(offHashSlotCount, cSlots+1), offHashSlotCount},
		{"hashSlotCount above entries", 1, put32(offHashSlotCount, 4), offHashSlotCount},
		{"begin timestamp negative", 0, put64(offBeginTimestamp, -1), offBeginTimestamp},
		{"end before begin", 1, put64(offEndTimestamp, baseTS), offEndTimestamp},
		{"begin after name", 0, put64(offBeginTimestamp, baseTS+1), offBeginTimestamp},
		{"begin phy negative", 0, put64(offBeginPhyOffset, -100), offBeginPhyOffset},
		{"end phy below begin", 1, put64(offEndPhyOffset, 699), offEndPhyOffset},
		{"files overlap", 1, put64(offBeginPhyOffset, 500), offBeginPhyOffset},
		{"file too long", 0, func(b []byte) []byte { return append(b, 0) }, int64(fileSize)},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs, _, paths, _ := buildCorruptible(t)
			mutate(t, fs, paths[c.file], c.fn)
			_, err := Open(fs, "/i", Options{SlotCount: cSlots, MaxEntries: cEntries})
			require.ErrorIs(t, err, ErrCorrupt)
			require.NotErrorIs(t, err, ErrNeedsRecover)
			var ce *CorruptError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, paths[c.file], ce.File)
			require.Equal(t, c.wantOff, ce.Offset)
			require.True(t, strings.HasPrefix(err.Error(), "index: "), err.Error())
		})
	}
}

func TestOptionsMismatch(t *testing.T) {
	fs, _, paths, _ := buildCorruptible(t)
	_, err := Open(fs, "/i", Options{SlotCount: cSlots - 1, MaxEntries: cEntries})
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, "options")
	// Larger options make every file look short: refused until Recover,
	// which refuses too.
	x, err := Open(fs, "/i", Options{SlotCount: cSlots, MaxEntries: cEntries + 1})
	require.NoError(t, err)
	_, err = x.Query("k", 1, 0, 1)
	require.ErrorIs(t, err, ErrNeedsRecover)
	require.ErrorIs(t, x.Recover(Checkpoint{File: paths[1][3:], Count: 4}), ErrCorrupt)
	require.NoError(t, x.Close())
}

func TestTruncatedFile(t *testing.T) {
	for _, c := range []struct {
		name string
		file int
		size int
	}{
		{"sealed file empty", 0, 0},
		{"sealed file in header", 0, 20},
		{"sealed file in slots", 0, 50},
		{"sealed file in entries", 0, 100},
		{"checkpoint file in entries", 1, 100},
		{"checkpoint file empty", 1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs, cp, paths, ops := buildCorruptible(t)
			mutate(t, fs, paths[c.file], func(b []byte) []byte { return b[:c.size] })
			x, err := Open(fs, "/i", Options{SlotCount: cSlots, MaxEntries: cEntries})
			if err != nil { // a torn header can be inconsistent rather than blank
				require.ErrorIs(t, err, ErrCorrupt)
				return
			}
			_, err = x.Query(ops[0].key, 10, 0, math.MaxInt64)
			require.ErrorIs(t, err, ErrCorrupt)
			require.ErrorIs(t, x.Put("k", 1e6, baseTS+1e6), ErrCorrupt)
			err = x.Recover(cp)
			require.ErrorIs(t, err, ErrCorrupt)
			require.NotErrorIs(t, err, ErrNeedsRecover, "a file the checkpoint covers is real damage")
			require.NoError(t, x.Close())
		})
	}
}

func TestCorruptEntries(t *testing.T) {
	const second = 40 + 4*cSlots // entry region of a file
	for _, c := range []struct {
		name       string
		fn         func([]byte) []byte
		queryFails bool // a Query for key-0 reaches the damage
	}{
		// Entries 1..3 of the second file are ops 7, 8, 9: key-1, key-2, key-0.
		{"prevIndex points forward", put32(second+3*20+offEntryPrevIndex, 3), true},
		{"prevIndex negative", put32(second+3*20+offEntryPrevIndex, -1), true},
		{"timeDiff negative", put32(second+3*20+offEntryTimeDiff, -5), true},
		{"keyHash negative", put32(second+1*20+offEntryKeyHash, -7), false},
		{"phyOffset decreasing", put64(second+2*20+offEntryPhyOffset, 1), false},
		{"prevIndex wrong", put32(second+2*20+offEntryPrevIndex, 1), false},
		{"first timeDiff non-zero", put32(second+1*20+offEntryTimeDiff, 1), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs, cp, paths, _ := buildCorruptible(t)
			mutate(t, fs, paths[1], c.fn)
			x := openT(t, fs, "/i", Options{SlotCount: cSlots, MaxEntries: cEntries})
			_, err := x.Query("TopicTest#key-0", 64, 0, math.MaxInt64)
			if c.queryFails {
				require.ErrorIs(t, err, ErrCorrupt)
				var ce *CorruptError
				require.ErrorAs(t, err, &ce)
				require.Equal(t, paths[1], ce.File)
			} else {
				require.NoError(t, err)
			}
			require.ErrorIs(t, x.Recover(cp), ErrCorrupt)
			require.NoError(t, x.Close())
		})
	}
}

// TestBitFlips flips random bits, mostly in headers, and requires that
// nothing panics and every error is ErrCorrupt.
func TestBitFlips(t *testing.T) {
	for seed := range uint64(400) {
		rng := rand.New(rand.NewPCG(seed, 7))
		fs, cp, paths, ops := buildCorruptible(t)
		path := paths[rng.IntN(2)]
		mutate(t, fs, path, func(b []byte) []byte {
			for range 1 + rng.IntN(3) {
				off := rng.IntN(headerSize)
				if rng.IntN(4) == 0 {
					off = rng.IntN(len(b))
				}
				b[off] ^= 1 << rng.IntN(8)
			}
			return b
		})
		exercise(t, fs, cp, ops)
	}
}

// exercise opens a possibly damaged index and uses it: it must not panic,
// and every error must be ErrCorrupt (or ErrInvalid for a Put the damaged
// state makes out of order).
func exercise(t *testing.T, fs vfs.FS, cp Checkpoint, ops []op) {
	t.Helper()
	opts := Options{SlotCount: cSlots, MaxEntries: cEntries}
	x, err := Open(fs, "/i", opts)
	if err != nil {
		require.ErrorIs(t, err, ErrCorrupt)
		return
	}
	defer x.Close()
	_ = x.Files()
	for _, o := range ops[:3] {
		if _, err := x.Query(o.key, 64, 0, math.MaxInt64); err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
		}
	}
	if err := x.Recover(cp); err != nil {
		require.ErrorIs(t, err, ErrCorrupt)
		return
	}
	for i := range 10 {
		if err := x.Put(ops[i%3].key, 1<<40+int64(i), baseTS+int64(i)*1000); err != nil {
			require.ErrorIs(t, err, ErrInvalid)
		}
	}
	if _, err := x.Query(ops[0].key, 64, 0, math.MaxInt64); err != nil {
		require.ErrorIs(t, err, ErrCorrupt)
	}
}

// FuzzOpen opens an index whose one file holds arbitrary bytes and uses it.
// It must never panic.
func FuzzOpen(f *testing.F) {
	golden, err := vfs.ReadFile(vfs.Default(), goldenPath)
	require.NoError(f, err)
	f.Add(golden, int32(6), false)
	f.Add(golden[:100], int32(6), false)
	f.Add(golden[:200], int32(3), true)
	f.Add(make([]byte, len(golden)), int32(1), false)
	f.Add([]byte{}, int32(0), false)
	f.Fuzz(func(t *testing.T, data []byte, count int32, pad bool) {
		if size := 40 + 8*4 + 16*20; pad && len(data) < size {
			data = append(data, make([]byte, size-len(data))...) // reach the mapped paths more often
		}
		fs := vfs.NewMem()
		require.NoError(t, fs.MkdirAll("/i", 0o755))
		name := fileName(baseTS + 1_000_000)
		w, err := fs.Create("/i/" + name)
		require.NoError(t, err)
		_, err = w.WriteAt(data, 0)
		require.NoError(t, err)
		require.NoError(t, w.Close())

		x, err := Open(fs, "/i", Options{SlotCount: 8, MaxEntries: 16})
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		defer x.Close()
		for _, o := range goldenOps {
			if _, err := x.Query(o.key, 64, 0, math.MaxInt64); err != nil {
				require.ErrorIs(t, err, ErrCorrupt)
			}
		}
		_ = x.Files()
		if err := x.Recover(Checkpoint{File: name, Count: count}); err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		for i, o := range goldenOps {
			if err := x.Put(o.key, math.MaxInt64/2+int64(i), baseTS+2_000_000+int64(i)); err != nil {
				require.ErrorIs(t, err, ErrInvalid)
			}
		}
		for _, o := range goldenOps {
			if _, err := x.Query(o.key, 64, 0, math.MaxInt64); err != nil {
				require.ErrorIs(t, err, ErrCorrupt)
			}
		}
		_, err = x.Sync()
		require.NoError(t, err)
	})
}
