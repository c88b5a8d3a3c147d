package consumequeue

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
)

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed)) }

// TestCrash puts units, syncs some, puts more, loses power and checks that
// every synced unit survived, that whatever survived beyond is correct, and
// that replaying the rest (with or without truncating first) is clean.
func TestCrash(t *testing.T) {
	const perFile = 7
	partial, holes := 0, 0 // the test is not vacuous
	for seed := uint64(0); seed < 200; seed++ {
		for _, keep := range []float64{0, 0.5, 1} {
			for _, truncate := range []bool{false, true} {
				name := fmt.Sprintf("seed=%d/keep=%v/truncate=%v", seed, keep, truncate)
				p, h := crashOnce(t, name, seed, keep, truncate, perFile)
				partial += p
				holes += h
			}
		}
	}
	t.Logf("%d runs recovered part of the unsynced units, %d had stale units zeroed", partial, holes)
	require.Positive(t, partial)
	require.Positive(t, holes)
}

// countWarnings counts the log records at level Warn or above.
type countWarnings struct{ n *int }

func (c countWarnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (c countWarnings) Handle(context.Context, slog.Record) error    { *c.n++; return nil }
func (c countWarnings) WithAttrs([]slog.Attr) slog.Handler           { return c }
func (c countWarnings) WithGroup(string) slog.Handler                { return c }

func crashOnce(t *testing.T, name string, seed uint64, keep float64, truncate bool, perFile int) (partial, holes int) {
	rng := newRand(seed)
	total := 1 + rng.Int64N(40)
	synced := rng.Int64N(total + 1)
	fs := vfs.NewMem()
	q, err := OpenQueue(fs, "/cq", "T", 0, Options{UnitsPerFile: perFile})
	require.NoError(t, err, name)
	putRange(t, q, 0, synced, 0)
	require.NoError(t, q.Sync(), name)
	for i := synced; i < total; i++ { // one unsynced write each, for the crash to keep or lose
		putRange(t, q, i, i+1, 0)
		require.NoError(t, q.WriteBuffered(), name)
	}

	crashed := fs.CrashClone(rng, keep)
	warnings := 0
	q2, err := OpenQueue(crashed, "/cq", "T", 0,
		Options{UnitsPerFile: perFile, Logger: slog.New(countWarnings{&warnings})})
	require.NoError(t, err, name)
	max := q2.MaxOffset()
	if max > synced && max < total {
		partial = 1
	}
	if warnings > 0 {
		holes = 1
	}
	require.GreaterOrEqual(t, max, synced, name)
	require.LessOrEqual(t, max, total, name)
	if keep == 1 {
		require.Equal(t, total, max, name)
	}
	checkRange(t, q2, 0, max, 0)
	if truncate {
		require.NoError(t, q2.TruncateTo(synced), name)
		require.Equal(t, synced, q2.MaxOffset(), name)
	}
	putRange(t, q2, synced, total, 0) // idempotent for what survived
	require.Equal(t, total, q2.MaxOffset(), name)
	require.NoError(t, q2.Sync(), name)

	// A second crash loses nothing now.
	again := crashed.CrashClone(rng, 0)
	q3, err := OpenQueue(again, "/cq", "T", 0, Options{UnitsPerFile: perFile})
	require.NoError(t, err, name)
	require.Equal(t, total, q3.MaxOffset(), name)
	checkRange(t, q3, 0, total, 0)
	require.NoError(t, q3.Close())
	require.NoError(t, q2.Close())
	require.NoError(t, q.Close())
	return partial, holes
}

// writeQueue builds a closed queue of n units in a MemFS.
func writeQueue(t *testing.T, perFile int, n int64) *vfs.MemFS {
	fs := vfs.NewMem()
	q := openQueue(t, fs, "/cq", perFile)
	putRange(t, q, 0, n, 0)
	require.NoError(t, q.Close())
	return fs
}

const qdir = "/cq/TopicTest/3/"

// patch overwrites bytes of a file in place.
func patch(t *testing.T, fs vfs.FS, name string, off int64, b []byte) {
	f, err := fs.OpenReadWrite(qdir + name)
	require.NoError(t, err)
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func be64(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }
func be32(v int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }

func TestCorruption(t *testing.T) {
	const (
		f0 = "00000000000000000000"
		f1 = "00000000000000000140"
		f2 = "00000000000000000280"
	)
	cases := []struct {
		name    string
		corrupt func(t *testing.T, fs *vfs.MemFS)
		want    string // in the error message
	}{
		{"negative size in tail", func(t *testing.T, fs *vfs.MemFS) {
			patch(t, fs, f2, 2*UnitSize+unitOffSize, be32(-1))
		}, f2 + " byte 40 "},
		{"negative phy in tail", func(t *testing.T, fs *vfs.MemFS) {
			patch(t, fs, f2, 1*UnitSize+unitOffPhyOffset, be64(-5))
		}, f2 + " byte 20 "},
		{"phy goes backwards in tail", func(t *testing.T, fs *vfs.MemFS) {
			patch(t, fs, f2, 3*UnitSize+unitOffPhyOffset, be64(100))
		}, f2 + " byte 60 "},
		{"zero unit at end of a complete file", func(t *testing.T, fs *vfs.MemFS) {
			patch(t, fs, f1, 6*UnitSize, make([]byte, UnitSize))
		}, f1 + " byte 120 "},
		{"phy goes backwards across files", func(t *testing.T, fs *vfs.MemFS) {
			patch(t, fs, f2, unitOffPhyOffset, be64(1300))
		}, f2 + " byte 0 "},
		{"blank unit in the middle", func(t *testing.T, fs *vfs.MemFS) {
			b := make([]byte, UnitSize)
			encodeUnit(b, rawUnit{size: blankSize})
			patch(t, fs, f2, 2*UnitSize, b)
		}, f2 + " byte 40 "},
		{"missing middle file", func(t *testing.T, fs *vfs.MemFS) {
			require.NoError(t, fs.Remove(qdir+f1))
		}, "missing file"},
		{"short middle file", func(t *testing.T, fs *vfs.MemFS) {
			f, err := fs.OpenReadWrite(qdir + f1)
			require.NoError(t, err)
			require.NoError(t, f.Truncate(100))
			require.NoError(t, f.Close())
		}, "size 100, want 140"},
		{"long last file", func(t *testing.T, fs *vfs.MemFS) {
			f, err := fs.OpenReadWrite(qdir + f2)
			require.NoError(t, err)
			require.NoError(t, f.Truncate(141))
			require.NoError(t, f.Close())
		}, "size 141, want 140"},
		{"misaligned name", func(t *testing.T, fs *vfs.MemFS) {
			require.NoError(t, fs.Rename(qdir+f2, qdir+"00000000000000000290"))
		}, "not a multiple"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := writeQueue(t, 7, 18)
			tc.corrupt(t, fs)
			_, err := OpenQueue(fs, "/cq", "TopicTest", 3, testOpts(t, 7))
			require.ErrorIs(t, err, ErrCorrupt)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestRecoveryRepairs(t *testing.T) {
	t.Run("garbage after the end is zeroed", func(t *testing.T) {
		fs := writeQueue(t, 7, 16)                                        // file 14 holds units 14, 15
		patch(t, fs, "00000000000000000280", 4*UnitSize, []byte{0, 0, 7}) // unit 18
		q := openQueue(t, fs, "/cq", 7)
		require.Equal(t, int64(16), q.MaxOffset())
		putRange(t, q, 16, 19, 0) // unit 18 is written in full
		require.NoError(t, q.TruncateTo(17))
		require.NoError(t, q.Close())
		data, err := vfs.ReadFile(fs, qdir+"00000000000000000280")
		require.NoError(t, err)
		require.Equal(t, make([]byte, 4*UnitSize), data[3*UnitSize:])
	})
	t.Run("torn unit with zero size ends the tail", func(t *testing.T) {
		fs := writeQueue(t, 7, 16)
		patch(t, fs, "00000000000000000280", 2*UnitSize, be64(1600)) // unit 16, size 0
		q := openQueue(t, fs, "/cq", 7)
		require.Equal(t, int64(16), q.MaxOffset())
		require.NoError(t, q.Close())
		data, err := vfs.ReadFile(fs, qdir+"00000000000000000280")
		require.NoError(t, err)
		require.Equal(t, make([]byte, 5*UnitSize), data[2*UnitSize:])
	})
	t.Run("short last file is extended", func(t *testing.T) {
		fs := writeQueue(t, 7, 16)
		f, err := fs.OpenReadWrite(qdir + "00000000000000000280")
		require.NoError(t, err)
		require.NoError(t, f.Truncate(30)) // unit 15 torn
		require.NoError(t, f.Close())
		q := openQueue(t, fs, "/cq", 7)
		require.Equal(t, int64(15), q.MaxOffset())
		putRange(t, q, 15, 21, 0)
		require.NoError(t, q.Close())
		q = openQueue(t, fs, "/cq", 7)
		checkRange(t, q, 0, 21, 0)
		require.NoError(t, q.Close())
	})
	t.Run("empty file after an incomplete one is removed", func(t *testing.T) {
		fs := writeQueue(t, 7, 21) // files 0, 7, 14, all complete
		patch(t, fs, "00000000000000000280", 5*UnitSize, make([]byte, 2*UnitSize))
		f, err := fs.Create(qdir + "00000000000000000420") // file 21, empty
		require.NoError(t, err)
		require.NoError(t, f.Truncate(7*UnitSize))
		require.NoError(t, f.Close())
		q := openQueue(t, fs, "/cq", 7)
		require.Equal(t, int64(19), q.MaxOffset())
		require.Equal(t, []string{"00000000000000000000", "00000000000000000140", "00000000000000000280"},
			queueFiles(t, fs, "/cq"))
		require.NoError(t, q.Close())
	})
	t.Run("empty file after a complete one is kept", func(t *testing.T) {
		fs := writeQueue(t, 7, 21)
		f, err := fs.Create(qdir + "00000000000000000420")
		require.NoError(t, err)
		require.NoError(t, f.Close()) // size 0: extended
		q := openQueue(t, fs, "/cq", 7)
		require.Equal(t, int64(21), q.MaxOffset())
		putRange(t, q, 21, 23, 0)
		require.NoError(t, q.Close())
		q = openQueue(t, fs, "/cq", 7)
		checkRange(t, q, 0, 23, 0)
		require.NoError(t, q.Close())
	})
	t.Run("other names are ignored", func(t *testing.T) {
		fs := writeQueue(t, 7, 3)
		f, err := fs.Create(qdir + "notes.txt")
		require.NoError(t, err)
		require.NoError(t, f.Close())
		q := openQueue(t, fs, "/cq", 7)
		require.Equal(t, int64(3), q.MaxOffset())
		require.NoError(t, q.Close())
	})
}

func TestInjectedErrors(t *testing.T) {
	setup := func(t *testing.T) (*vfs.MemFS, *vfs.Toggle, *Queue) {
		mem := vfs.NewMem()
		tg := &vfs.Toggle{}
		q := openQueue(t, vfs.WithErrors(mem, tg), "/cq", 7)
		putRange(t, q, 0, 5, 0)
		require.NoError(t, q.Sync())
		return mem, tg, q
	}
	reopen := func(t *testing.T, mem *vfs.MemFS, want int64) {
		q := openQueue(t, mem.CrashClone(newRand(1), 0), "/cq", 7)
		require.Equal(t, want, q.MaxOffset())
		checkRange(t, q, 0, want, 0)
		require.NoError(t, q.Close())
	}
	t.Run("write", func(t *testing.T) {
		mem, tg, q := setup(t)
		tg.Arm(vfs.OpWrite)
		u := unitAt(5, 0)
		require.NoError(t, q.Put(5, u.PhyOffset, u.Size, u.TagsCode), "in memory")
		require.ErrorIs(t, q.WriteBuffered(), vfs.ErrInjected)
		tg.Disarm()
		// Sticky: the queue refuses writes until reopened.
		u = unitAt(6, 0)
		require.ErrorIs(t, q.Put(6, u.PhyOffset, u.Size, u.TagsCode), vfs.ErrInjected)
		require.ErrorIs(t, q.Sync(), vfs.ErrInjected)
		require.ErrorIs(t, q.TruncateTo(2), vfs.ErrInjected)
		_, err := q.DeleteBefore(0)
		require.ErrorIs(t, err, vfs.ErrInjected)
		checkRange(t, q, 0, 6, 0) // reads still work, unit 5 from memory
		require.NoError(t, q.Close())
		reopen(t, mem, 5)
	})
	t.Run("sync", func(t *testing.T) {
		mem, tg, q := setup(t)
		putRange(t, q, 5, 6, 0)
		tg.Arm(vfs.OpSync)
		require.ErrorIs(t, q.Sync(), vfs.ErrInjected)
		tg.Disarm()
		require.ErrorIs(t, q.Sync(), vfs.ErrInjected)
		require.ErrorIs(t, q.Put(6, 600, 10, 0), vfs.ErrInjected)
		require.NoError(t, q.Close()) // no sync attempted after the failure
		reopen(t, mem, 5)
	})
	t.Run("roll", func(t *testing.T) {
		for _, op := range []vfs.Op{vfs.OpCreate, vfs.OpTruncate, vfs.OpSync, vfs.OpSyncDir, vfs.OpMap} {
			t.Run(op.String(), func(t *testing.T) {
				mem, tg, q := setup(t)
				putRange(t, q, 5, 7, 0)
				require.NoError(t, q.WriteBuffered())
				tg.Arm(op)
				u := unitAt(7, 0)
				require.NoError(t, q.Put(7, u.PhyOffset, u.Size, u.TagsCode), "in memory")
				require.ErrorIs(t, q.WriteBuffered(), vfs.ErrInjected)
				tg.Disarm()
				require.Equal(t, int64(8), q.MaxOffset(), "unit 7 stays readable, from memory")
				checkRange(t, q, 0, 8, 0)
				require.NoError(t, q.Close())
				q = openQueue(t, mem, "/cq", 7)
				require.Equal(t, int64(7), q.MaxOffset())
				putRange(t, q, 7, 9, 0)
				checkRange(t, q, 0, 9, 0)
				require.NoError(t, q.Close())
			})
		}
	})
	t.Run("truncate", func(t *testing.T) {
		for _, op := range []vfs.Op{vfs.OpRemove, vfs.OpSyncDir, vfs.OpWrite, vfs.OpSync} {
			t.Run(op.String(), func(t *testing.T) {
				mem, tg, q := setup(t)
				putRange(t, q, 5, 20, 0)
				tg.Arm(op)
				require.ErrorIs(t, q.TruncateTo(3), vfs.ErrInjected)
				tg.Disarm()
				require.Error(t, q.Put(3, 300, 10, 0))
				require.NoError(t, q.Close())
				q = openQueue(t, mem, "/cq", 7)
				require.NoError(t, q.TruncateTo(3))
				require.Equal(t, int64(3), q.MaxOffset())
				require.NoError(t, q.Close())
			})
		}
	})
	t.Run("delete", func(t *testing.T) {
		mem, tg, q := setup(t)
		putRange(t, q, 5, 30, 0)
		tg.Arm(vfs.OpRemove)
		_, err := q.DeleteBefore(2000)
		require.ErrorIs(t, err, vfs.ErrInjected)
		tg.Disarm()
		require.NoError(t, q.Close())
		q = openQueue(t, mem, "/cq", 7)
		n, err := q.DeleteBefore(2000)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		require.Equal(t, int64(20), q.MinOffset())
		require.NoError(t, q.Close())
	})
	t.Run("open", func(t *testing.T) {
		mem, _, q := setup(t)
		require.NoError(t, q.Close())
		for _, op := range []vfs.Op{vfs.OpOpen, vfs.OpMap, vfs.OpList} {
			tg := &vfs.Toggle{}
			tg.Arm(op)
			_, err := OpenQueue(vfs.WithErrors(mem, tg), "/cq", "TopicTest", 3, testOpts(t, 7))
			require.ErrorIs(t, err, vfs.ErrInjected, op.String())
			_, err = OpenSet(vfs.WithErrors(mem, tg), "/cq", testOpts(t, 7))
			require.ErrorIs(t, err, vfs.ErrInjected, op.String())
		}
	})
}
